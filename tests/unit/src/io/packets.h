// Hand-built IPv4/IPv6 TCP/UDP packets and an independent checksum routine
// (bytewise, big-endian) for the io tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace iotest {

using Bytes = std::vector<std::uint8_t>;

inline std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
inline std::uint32_t be32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
inline void put_be16(std::uint8_t* p, unsigned v) { p[0] = std::uint8_t(v >> 8); p[1] = std::uint8_t(v); }
inline void put_be32(std::uint8_t* p, std::uint32_t v) { put_be16(p, v >> 16); put_be16(p + 2, v & 0xffff); }

// Ones' complement sum of big-endian 16-bit words, the RFC 1071 textbook way.
inline std::uint32_t ref_sum(const std::uint8_t* p, std::size_t n, std::uint32_t acc = 0) {
    for (std::size_t i = 0; i + 1 < n; i += 2) acc += std::uint32_t(p[i]) << 8 | p[i + 1];
    if (n % 2) acc += std::uint32_t(p[n - 1]) << 8;
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return acc;
}

inline std::uint32_t ref_pseudo(std::span<const std::uint8_t> pkt, std::uint8_t proto, std::size_t l4len) {
    bool v4 = (pkt[0] >> 4) == 4;
    std::uint32_t acc = v4 ? ref_sum(&pkt[12], 8) : ref_sum(&pkt[8], 32);
    acc += proto;
    acc += std::uint32_t(l4len >> 16) + std::uint32_t(l4len & 0xffff);
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return acc;
}

inline std::size_t ip_header_len(std::span<const std::uint8_t> pkt) { return (pkt[0] >> 4) == 4 ? 20 : 40; }
inline std::uint8_t ip_proto(std::span<const std::uint8_t> pkt) { return (pkt[0] >> 4) == 4 ? pkt[9] : pkt[6]; }

inline bool ipv4_header_ok(std::span<const std::uint8_t> pkt) { return ref_sum(pkt.data(), 20) == 0xffff; }
inline bool l4_checksum_ok(std::span<const std::uint8_t> pkt) {
    std::size_t ih = ip_header_len(pkt);
    std::size_t l4len = pkt.size() - ih;
    return ref_sum(&pkt[ih], l4len, ref_pseudo(pkt, ip_proto(pkt), l4len)) == 0xffff;
}

struct Flow {
    bool v6 = false;
    bool tcp = true;
    std::uint16_t sport = 40000, dport = 5201;
    std::uint8_t last_addr_byte = 2;  // varies the source address
};

constexpr std::uint8_t kFin = 0x01, kSyn = 0x02, kPsh = 0x08, kAck = 0x10, kCwr = 0x80;

// A complete, valid packet (checksums filled unless partial_csum, in which case
// the L4 checksum field holds the pseudo-header sum as a TSO packet from tun does).
inline Bytes make_packet(const Flow& f, std::uint32_t seq, std::uint8_t flags, const Bytes& payload,
                         std::uint16_t ip_id = 0x1234, bool partial_csum = false, const Bytes& tcp_options = {}) {
    std::size_t ih = f.v6 ? 40 : 20;
    std::size_t th = f.tcp ? 20 + tcp_options.size() : 8;
    Bytes p(ih + th + payload.size(), 0);
    if (f.v6) {
        p[0] = 0x60;
        put_be16(&p[4], unsigned(th + payload.size()));
        p[6] = f.tcp ? 6 : 17;
        p[7] = 64;
        p[8] = 0xfd; p[23] = f.last_addr_byte;
        p[24] = 0xfd; p[39] = 1;
    } else {
        p[0] = 0x45;
        put_be16(&p[2], unsigned(p.size()));
        put_be16(&p[4], ip_id);
        p[6] = 0x40;  // DF
        p[8] = 64;
        p[9] = f.tcp ? 6 : 17;
        p[12] = 10; p[15] = f.last_addr_byte;
        p[16] = 10; p[19] = 1;
        put_be16(&p[10], ~ref_sum(p.data(), 20) & 0xffff);
    }
    std::uint8_t* l4 = &p[ih];
    put_be16(l4, f.sport);
    put_be16(l4 + 2, f.dport);
    if (f.tcp) {
        put_be32(l4 + 4, seq);
        put_be32(l4 + 8, 777);
        l4[12] = std::uint8_t((th / 4) << 4);
        l4[13] = flags;
        put_be16(l4 + 14, 500);
        std::copy(tcp_options.begin(), tcp_options.end(), l4 + 20);
    } else {
        put_be16(l4 + 4, unsigned(th + payload.size()));
    }
    std::copy(payload.begin(), payload.end(), l4 + th);
    std::size_t l4len = th + payload.size();
    std::size_t at = f.tcp ? 16 : 6;
    std::uint32_t pseudo = ref_pseudo(p, f.tcp ? 6 : 17, l4len);
    if (partial_csum) {
        put_be16(l4 + at, pseudo);
    } else {
        std::uint16_t c = ~ref_sum(l4, l4len, pseudo) & 0xffff;
        if (!f.tcp && c == 0) c = 0xffff;
        put_be16(l4 + at, c);
    }
    return p;
}

inline Bytes pattern(std::size_t n, std::uint8_t seed = 1) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = std::uint8_t(i * 7 + seed + (i >> 8));
    return b;
}

}  // namespace iotest
