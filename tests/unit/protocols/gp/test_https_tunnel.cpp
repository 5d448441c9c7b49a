#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "protocols/gp/https_tunnel.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {
using Bytes = std::vector<std::uint8_t>;

// resize+memcpy: g++ 12 flags vector::insert from a std::array as out of bounds.
void append(Bytes& out, std::span<const std::uint8_t> more) {
    const std::size_t at = out.size();
    out.resize(at + more.size());
    if (!more.empty()) std::memcpy(out.data() + at, more.data(), more.size());
}

Bytes bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes ip_packet(std::uint8_t version, std::size_t len, std::uint8_t fill) {
    Bytes p(len, fill);
    p[0] = static_cast<std::uint8_t>(version << 4 | 5);
    return p;
}

Bytes frame(const Bytes& packet) {
    auto h = frame_header_for_packet(packet);
    REQUIRE(h.ok());
    Bytes out;
    append(out, *h);
    append(out, packet);
    return out;
}

struct Seen {
    GpFrameType type;
    Bytes payload;
};

// Feeds `stream` cut at `cut` (and the rest in one piece); collects frames.
Result<std::vector<Seen>> decode_all(GpFrameDecoder& d, const Bytes& stream, std::size_t cut) {
    std::vector<Seen> out;
    for (auto piece : {std::span<const std::uint8_t>(stream).first(cut),
                       std::span<const std::uint8_t>(stream).subspan(cut)}) {
        while (!piece.empty()) {
            auto f = d.next(piece);
            if (!f) return f.error();
            if (*f) out.push_back({(*f)->type, Bytes((*f)->payload.begin(), (*f)->payload.end())});
        }
    }
    return out;
}
}  // namespace

TEST_CASE("gp tunnel: connect request is exactly OC's, no headers") {
    GpSessionCookie c;
    c.authcookie = Secret::from_string("4dc1b2b7e6a2f8d1c3b5a79e0f123456");
    c.user = "alice@corp";
    c.portal = "GP";
    Secret req = tunnel_connect_request(c);
    CHECK(req.reveal_text() ==
          "GET /ssl-tunnel-connect.sslvpn?authcookie=4dc1b2b7e6a2f8d1c3b5a79e0f123456"
          "&user=alice%40corp HTTP/1.1\r\n\r\n");
}

TEST_CASE("gp tunnel: START_TUNNEL reply detection") {
    CHECK(check_tunnel_reply(bytes("START_TUNNEL")).ok());
    GpTunnelRefusal r;
    auto bad = check_tunnel_reply(bytes("HTTP/1.1 502"), &r);
    REQUIRE_FALSE(bad.ok());
    CHECK(r.http_status == 502);
    CHECK(r.cookie_rejected());
    CHECK(bad.error().message == "gateway refused the tunnel: HTTP 502 (session cookie rejected)");
    CHECK(check_tunnel_reply(bytes("HTTP/1.0 403"), &r).error().message ==
          "gateway refused the tunnel: HTTP 403");
    CHECK_FALSE(r.cookie_rejected());
    CHECK(check_tunnel_reply(bytes("")).error().message.find("closed the connection") != std::string::npos);
    CHECK(check_tunnel_reply(bytes("START")).error().message.find("truncated") != std::string::npos);
    CHECK_FALSE(check_tunnel_reply(bytes("start_tunnel")).ok());
}

TEST_CASE("gp tunnel: frame header encode/decode") {
    GpFrameHeader h = encode_frame_header(GpFrameType::Ipv4, 0x54);
    const std::uint8_t expect[16] = {0x1a, 0x2b, 0x3c, 0x4d, 0x08, 0x00, 0x00, 0x54,
                                     0x01, 0, 0, 0, 0, 0, 0, 0};
    CHECK(std::memcmp(h.data(), expect, 16) == 0);
    const std::uint8_t ka[16] = {0x1a, 0x2b, 0x3c, 0x4d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(std::memcmp(kKeepaliveFrame.data(), ka, 16) == 0);

    auto v6 = frame_header_for_packet(ip_packet(6, 1280, 0));
    REQUIRE(v6.ok());
    CHECK((*v6)[4] == 0x86);
    CHECK((*v6)[5] == 0xDD);
    CHECK((*v6)[6] == 0x05);
    CHECK((*v6)[7] == 0x00);
    auto info = decode_frame_header(*v6);
    REQUIRE(info.ok());
    CHECK(info->type == GpFrameType::Ipv6);
    CHECK(info->payload_len == 1280);

    CHECK(frame_header_for_packet(Bytes{}).error().message == "empty packet");
    CHECK(frame_header_for_packet(ip_packet(5, 20, 0)).error().message == "packet has IP version 5");
    CHECK_FALSE(frame_header_for_packet(Bytes(70000, 0x45)).ok());

    GpFrameHeader bad = h;
    bad[0] = 0x1b;
    CHECK(decode_frame_header(bad).error().message == "bad frame magic 1b2b3c4d, expected 1a2b3c4d");
    GpFrameHeader ka_len = kKeepaliveFrame;
    ka_len[7] = 4;
    CHECK(decode_frame_header(ka_len).error().message == "keepalive frame with payload length 4");
    GpFrameHeader type = h;
    type[4] = 0x88;
    CHECK(decode_frame_header(type).error().message == "frame with unknown EtherType 0x8800");
    GpFrameHeader tail = h;
    tail[8] = 0;
    CHECK(decode_frame_header(tail).error().message == "data frame with unexpected bytes 8..15");
}

TEST_CASE("gp tunnel: decoder yields the same frames however the stream is cut") {
    const Bytes p1 = ip_packet(4, 84, 0xA1), p2 = ip_packet(6, 61, 0xB2), p3 = ip_packet(4, 1, 0);
    Bytes stream = frame(p1);
    append(stream, kKeepaliveFrame);
    append(stream, frame(p2));
    append(stream, frame(p3));

    for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
        CAPTURE(cut);
        GpFrameDecoder d;
        auto seen = decode_all(d, stream, cut);
        REQUIRE(seen.ok());
        REQUIRE(seen->size() == 4);
        CHECK((*seen)[0].type == GpFrameType::Ipv4);
        CHECK((*seen)[0].payload == p1);
        CHECK((*seen)[1].type == GpFrameType::Keepalive);
        CHECK((*seen)[1].payload.empty());
        CHECK((*seen)[2].type == GpFrameType::Ipv6);
        CHECK((*seen)[2].payload == p2);
        CHECK((*seen)[3].payload == p3);
        CHECK(d.pending() == 0);
    }

    // A frame whole in the input is handed out in place (no copy).
    GpFrameDecoder inplace;
    std::span<const std::uint8_t> all(stream);
    auto first = inplace.next(all);
    REQUIRE(first.ok());
    REQUIRE(first->has_value());
    CHECK((*first)->payload.data() == stream.data() + kFrameHeaderSize);
    CHECK(all.size() == stream.size() - kFrameHeaderSize - p1.size());

    // Byte by byte.
    GpFrameDecoder d;
    std::size_t frames = 0;
    for (std::uint8_t b : stream) {
        std::span<const std::uint8_t> one(&b, 1);
        auto f = d.next(one);
        REQUIRE(f.ok());
        CHECK(one.empty());
        if (*f) ++frames;
    }
    CHECK(frames == 4);

    // A partial frame is reported as pending (for an "EOF mid-frame" message).
    GpFrameDecoder part;
    std::span<const std::uint8_t> head = std::span<const std::uint8_t>(stream).first(20);
    auto none = part.next(head);
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
    CHECK(part.pending() == 20);
}

TEST_CASE("gp tunnel: bad magic and oversized frames stop the decoder") {
    Bytes stream = frame(ip_packet(4, 40, 1));
    Bytes bad = stream;
    bad[2] = 0;
    for (std::size_t cut = 0; cut <= bad.size(); ++cut) {
        CAPTURE(cut);
        GpFrameDecoder d;
        auto r = decode_all(d, bad, cut);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == "HTTPS tunnel: bad frame magic 1a2b004d, expected 1a2b3c4d");
        CHECK(d.failed());
        std::span<const std::uint8_t> more(stream);
        auto again = d.next(more);
        REQUIRE_FALSE(again.ok());
        CHECK(again.error().message.find("earlier bad frame") != std::string::npos);
    }

    GpFrameDecoder small(1000);
    Bytes big = frame(ip_packet(4, 1001, 2));
    std::span<const std::uint8_t> in(big);
    auto r = small.next(in);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message ==
          "HTTPS tunnel: frame payload of 1001 bytes exceeds the limit of 1000");
    GpFrameDecoder fits(1001);
    std::span<const std::uint8_t> in2(big);
    auto ok = fits.next(in2);
    REQUIRE(ok.ok());
    REQUIRE(ok->has_value());
    CHECK((*ok)->payload.size() == 1001);

    // A frame followed by garbage: the good frame comes out first.
    Bytes mixed = stream;
    append(mixed, Bytes(16, 0xEE));
    GpFrameDecoder d;
    std::span<const std::uint8_t> m(mixed);
    auto first = d.next(m);
    REQUIRE(first.ok());
    REQUIRE(first->has_value());
    CHECK_FALSE(d.next(m).ok());
}
