// The GlobalProtect ESP probe ("magic ping"): an ICMP/ICMPv6 echo request to the
// gateway's gw-address, sent through the tunnel, whose reply proves ESP works.
//
// Usage:
//   std::array<uint8_t, kGpProbeMaxSize> pkt;
//   GpProbe p = build_gp_probe(pkt, tunnel_ip, gw_address, probe_seq);  // 4- or 16-byte addrs
//   out_sa.seal(..., p.size, p.next_header) after copying pkt into the tx buffer
//   ...
//   if (is_gp_probe_reply(received.inner, gw_address)) esp_connected();  // not for tun
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace espvpn {

// "monitor\0\0pan ha " — the part of the payload a gateway checks.
inline constexpr std::array<std::uint8_t, 16> kGpProbeMagic = {
    0x6d, 0x6f, 0x6e, 0x69, 0x74, 0x6f, 0x72, 0x00, 0x00, 0x70, 0x61, 0x6e, 0x20, 0x68, 0x61, 0x20};
inline constexpr std::size_t kGpProbeIpv4Size = 20 + 8 + 16;  // 44
inline constexpr std::size_t kGpProbeIpv6Size = 40 + 8 + 16;  // 64
inline constexpr std::size_t kGpProbeMaxSize = kGpProbeIpv6Size;
inline constexpr std::uint16_t kGpProbeId = 0x4747;

struct GpProbe {
    std::size_t size = 0;          // 0: bad arguments (address sizes differ / not 4 or 16, out too small)
    std::uint8_t next_header = 0;  // ESP next header: 4 or 41
};

// src/dst: both 4 bytes (IPv4) or both 16 bytes (IPv6). Checksums are filled in.
GpProbe build_gp_probe(std::span<std::uint8_t> out, std::span<const std::uint8_t> src,
                       std::span<const std::uint8_t> dst, std::uint16_t seq,
                       std::uint16_t icmp_id = kGpProbeId);

// True for an echo reply (ICMP 0 / ICMPv6 129) from gw_address (4 or 16 bytes) whose
// payload starts with the magic bytes.
bool is_gp_probe_reply(std::span<const std::uint8_t> inner, std::span<const std::uint8_t> gw_address);

}  // namespace espvpn
