#include <doctest/doctest.h>

#include <random>

#include "src/io/checksum.h"
#include "src/io/offload.h"
#include "tests/unit/src/io/packets.h"

using namespace espvpn::io;
using namespace iotest;

namespace {

PacketBatch mtu_batch(std::size_t slots = 64) { return PacketBatch({slots, 1500, 32, 64}); }

VirtioNetHdr gso_hdr(const Flow& f, std::uint16_t gso_size) {
    VirtioNetHdr h;
    h.flags = VirtioNetHdr::kFlagNeedsCsum;
    h.gso_type = !f.tcp ? VirtioNetHdr::kGsoUdpL4 : f.v6 ? VirtioNetHdr::kGsoTcpV6 : VirtioNetHdr::kGsoTcpV4;
    h.gso_size = gso_size;
    h.csum_start = f.v6 ? 40 : 20;
    h.csum_offset = f.tcp ? 16 : 6;
    h.hdr_len = std::uint16_t(h.csum_start + (f.tcp ? 20 : 8));
    return h;
}

Bytes bytes_of(std::span<const std::uint8_t> s) { return Bytes(s.begin(), s.end()); }

// Splits and checks every segment against what TSO/USO must produce.
void check_split(const Flow& f, std::size_t payload_len, std::uint16_t gso, std::uint8_t flags) {
    Bytes payload = pattern(payload_len);
    Bytes super = make_packet(f, 1000, flags, payload, 0x1234, true);
    PacketBatch out = mtu_batch();
    SplitOutcome r = split_super_packet(gso_hdr(f, gso), super, out);
    REQUIRE(r.error == OffloadError::none);
    std::size_t expect = (payload_len + gso - 1) / gso;
    REQUIRE(r.packets == expect);
    REQUIRE(out.size() == expect);
    Bytes joined;
    std::size_t ih = f.v6 ? 40 : 20, th = f.tcp ? 20 : 8;
    for (std::size_t i = 0; i < expect; ++i) {
        auto p = out.packet(i);
        std::size_t seg = std::min<std::size_t>(gso, payload_len - i * gso);
        REQUIRE(p.size() == ih + th + seg);
        if (f.v6) {
            CHECK(be16(&p[4]) == th + seg);
        } else {
            CHECK(be16(&p[2]) == p.size());
            CHECK(be16(&p[4]) == 0x1234 + i);
            CHECK(ipv4_header_ok(p));
        }
        CHECK(l4_checksum_ok(p));
        if (f.tcp) {
            CHECK(be32(&p[ih + 4]) == 1000 + i * gso);
            std::uint8_t fl = p[ih + 13];
            bool last = i + 1 == expect, first = i == 0;
            CHECK(bool(fl & kFin) == (last && (flags & kFin)));
            CHECK(bool(fl & kPsh) == (last && (flags & kPsh)));
            CHECK(bool(fl & kCwr) == (first && (flags & kCwr)));
            CHECK(bool(fl & kAck) == bool(flags & kAck));
        } else {
            CHECK(be16(&p[ih + 4]) == 8 + seg);
        }
        joined.insert(joined.end(), p.begin() + long(ih + th), p.end());
    }
    CHECK(joined == payload);
}

}  // namespace

TEST_CASE("split: TCP over IPv4, IPv6; UDP (USO) over IPv4, IPv6") {
    Flow v4tcp, v6tcp, v4udp, v6udp;
    v6tcp.v6 = v6udp.v6 = true;
    v4udp.tcp = v6udp.tcp = false;
    check_split(v4tcp, 4000, 1448, kAck | kPsh | kFin | kCwr);
    check_split(v4tcp, 1448 * 3, 1448, kAck | kPsh);
    check_split(v6tcp, 65000 - 60, 1428, kAck | kPsh | kCwr);
    check_split(v4udp, 3000, 1200, 0);
    check_split(v6udp, 2401, 1200, 0);
    check_split(v4tcp, 1, 1448, kAck);  // one segment still gets checksummed
}

TEST_CASE("split: a non-GSO packet with NEEDS_CSUM gets its checksum completed") {
    Flow f;
    Bytes pkt = make_packet(f, 5, kAck, pattern(333), 1, true);
    VirtioNetHdr h;
    h.flags = VirtioNetHdr::kFlagNeedsCsum;
    h.csum_start = 20;
    h.csum_offset = 16;
    PacketBatch out = mtu_batch();
    REQUIRE(split_super_packet(h, pkt, out).error == OffloadError::none);
    REQUIRE(out.size() == 1);
    CHECK(l4_checksum_ok(out.packet(0)));
    CHECK(bytes_of(out.packet(0)) == make_packet(f, 5, kAck, pattern(333), 1, false));
    // An ICMP or any other packet without offload passes through unchanged.
    Bytes other = pkt;
    other[9] = 1;
    REQUIRE(split_super_packet(VirtioNetHdr{}, other, out).error == OffloadError::none);
    CHECK(bytes_of(out.packet(1)) == other);
}

TEST_CASE("split: malformed headers are rejected with a reason") {
    Flow f;
    Bytes good = make_packet(f, 1, kAck, pattern(3000), 1, true);
    VirtioNetHdr h = gso_hdr(f, 1000);
    PacketBatch out = mtu_batch();
    auto err = [&](VirtioNetHdr hh, const Bytes& p) {
        out.clear();
        SplitOutcome r = split_super_packet(hh, p, out);
        CHECK(out.size() == 0);
        CHECK(r.packets == 0);
        return r.error;
    };
    REQUIRE(split_super_packet(h, good, out).error == OffloadError::none);
    VirtioNetHdr z = h; z.gso_size = 0;
    CHECK(err(z, good) == OffloadError::gso_size_zero);
    VirtioNetHdr big = h; big.hdr_len = std::uint16_t(good.size() + 1);
    CHECK(err(big, good) == OffloadError::hdr_len_beyond_packet);
    VirtioNetHdr nocsum = h; nocsum.flags = 0;
    CHECK(err(nocsum, good) == OffloadError::gso_without_csum);
    VirtioNetHdr cs = h; cs.csum_start = 24;
    CHECK(err(cs, good) == OffloadError::bad_csum_start);
    VirtioNetHdr co = h; co.csum_offset = 6;
    CHECK(err(co, good) == OffloadError::bad_csum_offset);
    VirtioNetHdr ufo = h; ufo.gso_type = VirtioNetHdr::kGsoUdp;
    CHECK(err(ufo, good) == OffloadError::unsupported_gso_type);
    VirtioNetHdr v6 = h; v6.gso_type = VirtioNetHdr::kGsoTcpV6;
    CHECK(err(v6, good) == OffloadError::bad_l4_protocol);
    VirtioNetHdr uso = h; uso.gso_type = VirtioNetHdr::kGsoUdpL4;
    CHECK(err(uso, good) == OffloadError::bad_l4_protocol);

    Bytes opts = good; opts[0] = 0x46;
    CHECK(err(h, opts) == OffloadError::ipv4_options);
    Bytes frag = good; frag[6] |= 0x20;
    CHECK(err(h, frag) == OffloadError::ipv4_fragment);
    Bytes ver = good; ver[0] = 0x55;
    CHECK(err(h, ver) == OffloadError::bad_ip_version);
    Bytes doff = good; doff[32] = 0x40;
    CHECK(err(h, doff) == OffloadError::bad_tcp_header);
    Bytes doff_big = good; doff_big.resize(60); doff_big[32] = 0xf0; h.hdr_len = 40;
    CHECK(err(h, doff_big) == OffloadError::bad_tcp_header);
    Bytes hdr_only(good.begin(), good.begin() + 40);
    CHECK(err(h, hdr_only) == OffloadError::no_payload);
    CHECK(err(h, Bytes{}) == OffloadError::hdr_len_beyond_packet);
    VirtioNetHdr h0 = h; h0.hdr_len = 0;
    CHECK(err(h0, Bytes{}) == OffloadError::truncated);

    Flow f6; f6.v6 = true;
    Bytes ext = make_packet(f6, 1, kAck, pattern(3000), 1, true);
    ext[6] = 0;  // hop-by-hop options header
    CHECK(err(gso_hdr(f6, 1000), ext) == OffloadError::ipv6_extension_headers);

    // Capacity limits: a segment larger than a slot; more segments than slots.
    VirtioNetHdr jumbo = h; jumbo.gso_size = 2000;
    CHECK(err(jumbo, good) == OffloadError::segment_too_large);
    VirtioNetHdr tiny = h; tiny.gso_size = 10;
    CHECK(err(tiny, good) == OffloadError::too_many_segments);
    out.clear();
    for (int i = 0; i < 62; ++i) out.commit(0), (void)out.next_room();
    CHECK(split_super_packet(h, good, out).error == OffloadError::batch_full);
    CHECK(out.size() == 62);
}

TEST_CASE("split: truncated or corrupted input never overreads (ASan) and appends nothing on error") {
    Flow f;
    Bytes good = make_packet(f, 1, kAck, pattern(3000), 1, true, Bytes{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2});
    VirtioNetHdr h = gso_hdr(f, 1000);
    PacketBatch out = mtu_batch();
    std::mt19937 rng(7);
    for (std::size_t len = 0; len <= 100; ++len) {
        // Copy into an exactly sized heap buffer so ASan sees any overread.
        std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[len ? len : 1]);
        std::copy(good.begin(), good.begin() + long(len), buf.get());
        out.clear();
        SplitOutcome r = split_super_packet(h, {buf.get(), len}, out);
        CHECK(r.packets == out.size());
    }
    for (int round = 0; round < 2000; ++round) {
        Bytes p = good;
        p.resize(rng() % p.size());
        for (int k = 0; k < 3 && !p.empty(); ++k) p[rng() % std::min<std::size_t>(p.size(), 64)] = std::uint8_t(rng());
        VirtioNetHdr hh = h;
        std::uint8_t raw[10];
        for (auto& b : raw) b = std::uint8_t(rng());
        if (round % 2) REQUIRE(parse_virtio_net_hdr(raw, hh));
        out.clear();
        SplitOutcome r = split_super_packet(hh, p, out);
        CHECK(r.packets == out.size());
        if (r.error != OffloadError::none) CHECK(std::string(describe(r.error)).size() > 0);
    }
}

TEST_CASE("virtio_net_hdr round trip") {
    VirtioNetHdr h{1, 4, 60, 1428, 40, 16};
    std::uint8_t buf[10];
    write_virtio_net_hdr(h, buf);
    VirtioNetHdr back;
    REQUIRE(parse_virtio_net_hdr(buf, back));
    CHECK(back.gso_type == 4);
    CHECK(back.hdr_len == 60);
    CHECK(back.gso_size == 1428);
    CHECK(back.csum_start == 40);
    CHECK(back.csum_offset == 16);
    CHECK_FALSE(parse_virtio_net_hdr(std::span<const std::uint8_t>(buf, 9), back));
}

// ---------------------------------------------------------------------------
// GRO

namespace {

PacketBatch gro_batch() { return PacketBatch({64, 65535, 64, 0}); }

void push(PacketBatch& b, const Bytes& p) {
    auto room = b.next_room();
    REQUIRE(room.size() >= p.size());
    std::copy(p.begin(), p.end(), room.begin());
    b.commit(p.size());
}

struct Written {
    VirtioNetHdr hdr;
    Bytes packet;
};

std::vector<Written> run_gro(PacketBatch& b, bool tcp = true, bool udp = true, std::size_t* merged = nullptr) {
    GroCoalescer gro(64);
    auto r = gro.coalesce(b, tcp, udp);
    REQUIRE(r.error == OffloadError::none);
    if (merged) *merged = r.merged;
    std::vector<Written> out;
    for (std::size_t k = 0; k < r.writes(); ++k) {
        Bytes whole;  // what writev hands the tun: the pieces one after the other
        for (const iovec& piece : r.write(k)) {
            const auto* at = static_cast<const std::uint8_t*>(piece.iov_base);
            whole.insert(whole.end(), at, at + piece.iov_len);
        }
        Written w;
        REQUIRE(parse_virtio_net_hdr(whole, w.hdr));
        w.packet = Bytes(whole.begin() + 10, whole.end());
        out.push_back(w);
    }
    return out;
}

}  // namespace

TEST_CASE("gro: contiguous TCP segments coalesce, and the result splits back into the same packets") {
    for (bool v6 : {false, true}) {
        Flow f;
        f.v6 = v6;
        std::vector<Bytes> segs;
        PacketBatch b = gro_batch();
        for (int i = 0; i < 5; ++i) {
            std::size_t len = i == 4 ? 300 : 1400;
            segs.push_back(make_packet(f, 100 + i * 1400, kAck | (i == 4 ? kPsh : 0), pattern(len, std::uint8_t(i)),
                                       std::uint16_t(0x10 + i)));
            push(b, segs.back());
        }
        std::size_t merged = 0;
        auto w = run_gro(b, true, false, &merged);
        REQUIRE(w.size() == 1);
        CHECK(merged == 4);
        const VirtioNetHdr& h = w[0].hdr;
        CHECK(h.gso_type == (v6 ? VirtioNetHdr::kGsoTcpV6 : VirtioNetHdr::kGsoTcpV4));
        CHECK(h.gso_size == 1400);
        CHECK(h.flags == VirtioNetHdr::kFlagNeedsCsum);
        CHECK(h.csum_start == (v6 ? 40 : 20));
        CHECK(h.csum_offset == 16);
        const Bytes& p = w[0].packet;
        std::size_t ih = v6 ? 40 : 20;
        CHECK(p.size() == ih + 20 + 4 * 1400 + 300);
        if (!v6) CHECK(ipv4_header_ok(p));
        CHECK(p[ih + 13] == (kAck | kPsh));
        // The checksum field carries the pseudo-header sum the kernel completes.
        CHECK(be16(&p[ih + 16]) == ref_pseudo(p, 6, p.size() - ih));
        // Splitting it again gives the original segments' payloads and checksums.
        PacketBatch again = mtu_batch();
        REQUIRE(split_super_packet(h, p, again).error == OffloadError::none);
        REQUIRE(again.size() == 5);
        for (std::size_t i = 0; i < 5; ++i) {
            Bytes got = bytes_of(again.packet(i));
            Bytes want = segs[i];
            if (!v6) {  // IP IDs are regenerated from the first one
                CHECK(be16(&got[4]) == 0x10 + i);
            }
            CHECK(got == want);
        }
    }
}

TEST_CASE("gro: what must not merge is written as-is and flows keep their order") {
    Flow a, b2;
    b2.sport = 40001;
    PacketBatch b = gro_batch();
    push(b, make_packet(a, 0, kAck, pattern(1000)));           // 0: a head
    push(b, make_packet(b2, 0, kAck, pattern(1000)));          // 1: b head
    push(b, make_packet(a, 1000, kAck, pattern(1000)));        // 2: a merges into 0
    push(b, make_packet(b2, 5000, kAck, pattern(1000)));       // 3: b gap -> new item
    push(b, make_packet(a, 2000, kAck | kSyn, pattern(1000))); // 4: SYN -> as-is, closes a
    push(b, make_packet(a, 3000, kAck, pattern(1000)));        // 5: a new item (after 4)
    Bytes bad = make_packet(a, 4000, kAck, pattern(1000));
    bad.back() ^= 1;                                           // 6: bad checksum -> as-is
    push(b, bad);
    push(b, make_packet(b2, 6000, kAck, pattern(1000)));       // 7: b merges into 3
    push(b, make_packet(a, 0, kAck, {}));                      // 8: pure ACK, as-is
    push(b, make_packet(b2, 7000, kAck, pattern(500)));        // 9: b merges into 3 (short: closes)
    push(b, make_packet(b2, 7500, kAck, pattern(500)));        // 10: b new item
    std::size_t merged = 0;
    auto w = run_gro(b, true, false, &merged);
    CHECK(merged == 3);
    REQUIRE(w.size() == 8);
    auto seq = [](const Written& x) { return be32(&x.packet[24]); };
    auto sport = [](const Written& x) { return be16(&x.packet[20]); };
    CHECK((sport(w[0]) == 40000 && seq(w[0]) == 0 && w[0].hdr.gso_type == VirtioNetHdr::kGsoTcpV4 && w[0].packet.size() == 2040));
    CHECK((sport(w[1]) == 40001 && seq(w[1]) == 0 && w[1].hdr.gso_type == VirtioNetHdr::kGsoNone));
    CHECK((sport(w[2]) == 40001 && seq(w[2]) == 5000 && w[2].packet.size() == 40 + 2500));
    CHECK((seq(w[3]) == 2000 && w[3].hdr.gso_type == VirtioNetHdr::kGsoNone));
    CHECK((seq(w[4]) == 3000 && w[4].packet.size() == 1040));
    CHECK(w[5].packet == bad);
    CHECK(w[6].packet.size() == 40);
    CHECK(seq(w[7]) == 7500);
    for (const auto& x : w) {
        if (x.hdr.gso_type == VirtioNetHdr::kGsoNone) CHECK(x.hdr.flags == 0);
    }
}

TEST_CASE("gro: options must match, and TCP merging can be off") {
    Flow f;
    Bytes ts1{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2};
    Bytes ts2{1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 2};
    PacketBatch b = gro_batch();
    push(b, make_packet(f, 0, kAck, pattern(1000), 1, false, ts1));
    push(b, make_packet(f, 1000, kAck, pattern(1000), 1, false, ts1));
    push(b, make_packet(f, 2000, kAck, pattern(1000), 1, false, ts2));
    auto w = run_gro(b);
    REQUIRE(w.size() == 2);
    CHECK(w[0].packet.size() == 20 + 32 + 2000);
    CHECK(w[0].hdr.hdr_len == 52);

    PacketBatch c = gro_batch();
    push(c, make_packet(f, 0, kAck, pattern(1000)));
    push(c, make_packet(f, 1000, kAck, pattern(1000)));
    CHECK(run_gro(c, false, false).size() == 2);

    // A window update is not merged away.
    PacketBatch d = gro_batch();
    push(d, make_packet(f, 0, kAck, pattern(1000)));
    Bytes moved = make_packet(f, 1000, kAck, pattern(1000));
    put_be16(&moved[34], 501);  // window
    put_be16(&moved[36], 0);
    put_be16(&moved[36], ~ref_sum(&moved[20], moved.size() - 20, ref_pseudo(moved, 6, moved.size() - 20)) & 0xffff);
    push(d, moved);
    auto wd = run_gro(d);
    REQUIRE(wd.size() == 2);
    CHECK(l4_checksum_ok(wd[1].packet));
}

TEST_CASE("gro: UDP datagrams coalesce only when USO is on, and split back") {
    Flow f;
    f.tcp = false;
    PacketBatch b = gro_batch();
    std::vector<Bytes> d;
    for (int i = 0; i < 3; ++i) {
        d.push_back(make_packet(f, 0, 0, pattern(i == 2 ? 100 : 1200, std::uint8_t(i))));
        push(b, d.back());
    }
    auto w = run_gro(b, true, true);
    REQUIRE(w.size() == 1);
    CHECK(w[0].hdr.gso_type == VirtioNetHdr::kGsoUdpL4);
    CHECK(w[0].hdr.gso_size == 1200);
    PacketBatch again = mtu_batch();
    REQUIRE(split_super_packet(w[0].hdr, w[0].packet, again).error == OffloadError::none);
    REQUIRE(again.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        Bytes got = bytes_of(again.packet(i));
        CHECK(be16(&got[4]) == 0x1234 + i);
        put_be16(&got[4], 0x1234);  // restore the ID the test used for all
        put_be16(&got[10], 0);
        put_be16(&got[10], ~ref_sum(got.data(), 20) & 0xffff);
        CHECK(got == d[i]);
    }

    PacketBatch c = gro_batch();
    for (auto& p : d) push(c, p);
    CHECK(run_gro(c, true, false).size() == 3);
}

TEST_CASE("gro: merged payloads are gathered in place, so small slots merge too; missing headroom is an error") {
    Flow f;
    PacketBatch small({8, 1500, 16, 0});
    Bytes first = make_packet(f, 0, kAck, pattern(1000, 1));
    Bytes second = make_packet(f, 1000, kAck, pattern(1000, 2));
    push(small, first);
    push(small, second);
    const std::uint8_t* second_payload = small.packet(1).data() + 40;
    GroCoalescer gro(8);
    auto r = gro.coalesce(small, true, true);
    REQUIRE(r.error == OffloadError::none);
    REQUIRE(r.writes() == 1);
    CHECK(r.merged == 1);
    // One write of two pieces: [virtio hdr | head packet], then the second payload where it lies.
    auto pieces = r.write(0);
    REQUIRE(pieces.size() == 2);
    CHECK(pieces[0].iov_len == 10 + 40 + 1000);
    CHECK(pieces[1].iov_base == second_payload);
    CHECK(pieces[1].iov_len == 1000);

    PacketBatch none({8, 1500, 4, 0});
    push(none, make_packet(f, 0, kAck, pattern(10)));
    CHECK(gro.coalesce(none, true, true).error == OffloadError::no_headroom);
    CHECK_THROWS(GroCoalescer(0xffff));
}

TEST_CASE("checksum: copy_and_add copies and sums like add, at every length and alignment") {
    Bytes src(300), dst(310);
    std::uint32_t x = 12345;
    for (auto& b : src) b = std::uint8_t((x = x * 1103515245u + 12345u) >> 24);
    for (std::size_t from : {0u, 1u, 3u})
        for (std::size_t n = 0; n + from <= src.size(); ++n) {
            std::fill(dst.begin(), dst.end(), std::uint8_t(0xee));
            const std::uint64_t start = 0xfffe0001u;  // a running sum that carries
            const std::uint64_t got = espvpn::io::checksum::copy_and_add(dst.data() + 2, src.data() + from, n, start);
            const std::uint64_t want = espvpn::io::checksum::add(start, {src.data() + from, n});
            CHECK(espvpn::io::checksum::fold(got) == espvpn::io::checksum::fold(want));
            CHECK(std::equal(src.begin() + from, src.begin() + from + n, dst.begin() + 2));
            CHECK(dst[1] == 0xee);
            CHECK(dst[2 + n] == 0xee);
        }
}

TEST_CASE("checksum: add sums like the RFC 1071 textbook loop, at every length and alignment") {
    Bytes src(300);
    std::uint32_t x = 777;
    for (auto& b : src) b = std::uint8_t((x = x * 1103515245u + 12345u) >> 24);
    for (std::size_t from : {0u, 1u, 2u, 5u})
        for (std::size_t n = 0; n + from <= src.size(); ++n) {
            // The native-order sum, stored natively, is the big-endian textbook sum on the wire.
            const std::uint16_t got = espvpn::io::checksum::fold(espvpn::io::checksum::add(0, {src.data() + from, n}));
            std::uint8_t stored[2];
            espvpn::io::checksum::store(stored, got);
            CHECK(be16(stored) == ref_sum(src.data() + from, n));
        }
}

TEST_CASE("checksum: the wide (AVX2) loops agree with the textbook sum up to 64 KiB, all-ones data too") {
    namespace cs = espvpn::io::checksum;
    for (std::uint8_t fill : {std::uint8_t(0xff), std::uint8_t(0)}) {
        Bytes src(65535 + 3), dst(65535 + 3);
        std::uint32_t x = 99;
        for (auto& b : src) b = fill ? fill : std::uint8_t((x = x * 1103515245u + 12345u) >> 24);
        for (std::size_t n : {127u, 128u, 129u, 191u, 192u, 1400u, 1447u, 9000u, 65534u, 65535u}) {
            CAPTURE(n);
            const std::uint16_t got = cs::fold(cs::add(0, {src.data() + 1, n}));
            std::uint8_t stored[2];
            cs::store(stored, got);
            CHECK(be16(stored) == ref_sum(src.data() + 1, n));
            CHECK(cs::fold(cs::copy_and_add(dst.data() + 3, src.data() + 1, n, 0xffffffffffffull)) ==
                  cs::fold(cs::add_narrow(0xffffffffffffull, {src.data() + 1, n})));
            CHECK(std::equal(src.begin() + 1, src.begin() + 1 + static_cast<long>(n), dst.begin() + 3));
        }
    }
}
