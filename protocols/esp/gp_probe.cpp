#include "protocols/esp/gp_probe.h"

#include <algorithm>
#include <cstring>

#include "protocols/base/byte_order.h"

namespace espvpn {

namespace {

constexpr std::uint8_t kProtoIcmp = 1;
constexpr std::uint8_t kProtoIcmpv6 = 58;

// One's-complement sum of 16-bit big-endian words (RFC 1071), not yet folded.
std::uint32_t sum16(std::span<const std::uint8_t> data, std::uint32_t acc = 0) {
    std::size_t i = 0;
    for (; i + 1 < data.size(); i += 2) acc += std::uint32_t{data[i]} << 8 | data[i + 1];
    if (i < data.size()) acc += std::uint32_t{data[i]} << 8;
    return acc;
}

std::uint16_t fold(std::uint32_t acc) {
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return static_cast<std::uint16_t>(~acc);
}

// ICMP echo request header + magic payload at p (8 + 16 bytes), checksum left zero.
void write_echo(std::uint8_t* p, std::uint8_t type, std::uint16_t id, std::uint16_t seq) {
    p[0] = type;
    p[1] = 0;
    store_be16(p + 2, 0);
    store_be16(p + 4, id);
    store_be16(p + 6, seq);
    std::memcpy(p + 8, kGpProbeMagic.data(), kGpProbeMagic.size());
}

constexpr std::size_t kEchoSize = 8 + kGpProbeMagic.size();

}  // namespace

GpProbe build_gp_probe(std::span<std::uint8_t> out, std::span<const std::uint8_t> src,
                       std::span<const std::uint8_t> dst, std::uint16_t seq, std::uint16_t icmp_id) {
    if (src.size() != dst.size()) return {};
    if (src.size() == 4) {
        if (out.size() < kGpProbeIpv4Size) return {};
        std::uint8_t* p = out.data();
        const std::uint8_t ip[12] = {0x45, 0x00, 0x00, kGpProbeIpv4Size, 0x47, 0x47, 0x40, 0x00, 64, kProtoIcmp, 0, 0};
        std::memcpy(p, ip, sizeof ip);
        std::memcpy(p + 12, src.data(), 4);
        std::memcpy(p + 16, dst.data(), 4);
        store_be16(p + 10, fold(sum16({p, 20})));
        write_echo(p + 20, 8, icmp_id, seq);
        store_be16(p + 22, fold(sum16({p + 20, kEchoSize})));
        return {kGpProbeIpv4Size, 4};
    }
    if (src.size() == 16) {
        if (out.size() < kGpProbeIpv6Size) return {};
        std::uint8_t* p = out.data();
        const std::uint8_t ip[8] = {0x60, 0, 0, 0, 0, kEchoSize, kProtoIcmpv6, 128};
        std::memcpy(p, ip, sizeof ip);
        std::memcpy(p + 8, src.data(), 16);
        std::memcpy(p + 24, dst.data(), 16);
        write_echo(p + 40, 128, icmp_id, seq);
        // RFC 8200 8.1 pseudo-header: addresses, upper-layer length, next header.
        std::uint32_t acc = sum16({p + 8, 32});
        acc += kEchoSize;
        acc += kProtoIcmpv6;
        store_be16(p + 42, fold(sum16({p + 40, kEchoSize}, acc)));
        return {kGpProbeIpv6Size, 41};
    }
    return {};
}

bool is_gp_probe_reply(std::span<const std::uint8_t> inner, std::span<const std::uint8_t> gw_address) {
    auto magic_at = [&](std::size_t off) {
        return inner.size() >= off + kGpProbeMagic.size() &&
               std::equal(kGpProbeMagic.begin(), kGpProbeMagic.end(), inner.begin() + static_cast<std::ptrdiff_t>(off));
    };
    if (gw_address.size() == 4) {
        if (inner.size() < 20 || (inner[0] >> 4) != 4) return false;
        const std::size_t ihl = (inner[0] & 0x0f) * std::size_t{4};
        if (ihl < 20 || inner[9] != kProtoIcmp || !std::equal(gw_address.begin(), gw_address.end(), inner.begin() + 12))
            return false;
        return inner.size() >= ihl + 8 && inner[ihl] == 0 /* echo reply */ && magic_at(ihl + 8);
    }
    if (gw_address.size() == 16) {
        if (inner.size() < 48 || (inner[0] >> 4) != 6 || inner[6] != kProtoIcmpv6) return false;
        if (!std::equal(gw_address.begin(), gw_address.end(), inner.begin() + 8)) return false;
        return inner[40] == 129 /* echo reply */ && magic_at(48);
    }
    return false;
}

}  // namespace espvpn
