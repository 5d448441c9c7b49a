#include "protocols/gp/https_tunnel.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "protocols/base/byte_order.h"
#include "protocols/http/form.h"

namespace espvpn::gp {

Secret tunnel_connect_request(const GpSessionCookie& cookie, std::string_view tunnel_url) {
    http::FormBody query;
    query.add("authcookie", cookie.authcookie).add("user", cookie.user);
    Secret q = query.finish();
    const std::string_view head = "GET ", mid = "?", tail = " HTTP/1.1\r\n\r\n";
    Secret out(head.size() + tunnel_url.size() + mid.size() + q.size() + tail.size());
    auto dst = out.reveal_mutable().begin();
    for (std::string_view part : {head, tunnel_url, mid, q.reveal_text(), tail})
        dst = std::copy(part.begin(), part.end(), dst);
    return out;
}

Status check_tunnel_reply(std::span<const std::uint8_t> first_bytes, GpTunnelRefusal* refusal) {
    std::string_view text(reinterpret_cast<const char*>(first_bytes.data()), first_bytes.size());
    if (text == "START_TUNNEL") return {};
    GpTunnelRefusal r;
    if (text.size() >= 12 && text.substr(0, 5) == "HTTP/" && text[8] == ' ') {
        std::string_view code = text.substr(9, 3);
        if (std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; }))
            r.http_status = std::stoi(std::string(code));
    }
    if (refusal) *refusal = r;
    if (text.empty()) return make_error("gateway closed the connection instead of starting the tunnel");
    if (r.http_status == 502)
        return make_error("gateway refused the tunnel: HTTP 502 (session cookie rejected)");
    if (r.http_status)
        return make_error("gateway refused the tunnel: HTTP " + std::to_string(r.http_status));
    if (text.size() < kTunnelReplySize)
        return make_error("tunnel reply truncated after " + std::to_string(text.size()) + " bytes");
    return make_error("unexpected tunnel reply (not START_TUNNEL)");
}

GpFrameHeader encode_frame_header(GpFrameType type, std::uint16_t payload_len) {
    GpFrameHeader h{};
    std::copy(kFrameMagic.begin(), kFrameMagic.end(), h.begin());
    store_be16(h.data() + 4, static_cast<std::uint16_t>(type));
    store_be16(h.data() + 6, payload_len);
    if (type != GpFrameType::Keepalive) h[8] = 1;
    return h;
}

Result<GpFrameHeader> frame_header_for_packet(std::span<const std::uint8_t> packet) {
    if (packet.empty()) return make_error("empty packet");
    if (packet.size() > 0xFFFF)
        return make_error("packet of " + std::to_string(packet.size()) + " bytes does not fit a frame");
    const unsigned version = packet[0] >> 4;
    if (version != 4 && version != 6)
        return make_error("packet has IP version " + std::to_string(version));
    return encode_frame_header(version == 4 ? GpFrameType::Ipv4 : GpFrameType::Ipv6,
                               static_cast<std::uint16_t>(packet.size()));
}

Result<GpFrameInfo> decode_frame_header(std::span<const std::uint8_t, kFrameHeaderSize> h) {
    if (!std::equal(kFrameMagic.begin(), kFrameMagic.end(), h.begin())) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "%02x%02x%02x%02x", h[0], h[1], h[2], h[3]);
        return make_error(std::string("bad frame magic ") + hex + ", expected 1a2b3c4d");
    }
    const std::uint16_t type = load_be16(h.data() + 4);
    const std::uint16_t len = load_be16(h.data() + 6);
    static constexpr std::uint8_t data_tail[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    static constexpr std::uint8_t zero_tail[8] = {};
    switch (static_cast<GpFrameType>(type)) {
        case GpFrameType::Keepalive:
            if (len != 0) return make_error("keepalive frame with payload length " + std::to_string(len));
            if (std::memcmp(h.data() + 8, zero_tail, 8) != 0)
                return make_error("keepalive frame with non-zero bytes 8..15");
            return GpFrameInfo{GpFrameType::Keepalive, 0};
        case GpFrameType::Ipv4:
        case GpFrameType::Ipv6:
            if (len == 0) return make_error("data frame with payload length 0");
            if (std::memcmp(h.data() + 8, data_tail, 8) != 0)
                return make_error("data frame with unexpected bytes 8..15");
            return GpFrameInfo{static_cast<GpFrameType>(type), len};
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%04x", type);
    return make_error(std::string("frame with unknown EtherType ") + hex);
}

GpFrameDecoder::GpFrameDecoder(std::size_t max_payload)
    : splitter_(kFrameHeaderSize, std::min<std::size_t>(max_payload, 0xFFFF)),
      max_payload_(std::min<std::size_t>(max_payload, 0xFFFF)) {}

Result<GpFrameInfo> GpFrameDecoder::check_header(std::span<const std::uint8_t> header) const {
    auto info = decode_frame_header(header.first<kFrameHeaderSize>());
    if (info && info->payload_len > max_payload_)
        return make_error("frame payload of " + std::to_string(info->payload_len) +
                          " bytes exceeds the limit of " + std::to_string(max_payload_));
    return info;
}

Result<std::optional<GpFrame>> GpFrameDecoder::fail(std::string message) {
    failed_ = true;
    return make_error("HTTPS tunnel: " + std::move(message));
}

Result<std::optional<GpFrame>> GpFrameDecoder::next(std::span<const std::uint8_t>& input) {
    if (failed_) return make_error("HTTPS tunnel: decoder stopped after an earlier bad frame");
    auto frame = splitter_.next(input, [this](std::span<const std::uint8_t> h) { return check_header(h); });
    if (!frame) return fail(frame.error().message);
    if (!*frame) return std::optional<GpFrame>{};
    return std::optional<GpFrame>(GpFrame{(*frame)->info.type, (*frame)->payload});
}

}  // namespace espvpn::gp
