// The answer to an inner packet larger than the tunnel MTU: an ICMP
// "fragmentation needed" (IPv4 with DF) or ICMPv6 "packet too big", written back
// into the tun so the sender's kernel learns the path MTU (as a router would).
// IPv4 packets without DF are dropped (and counted) rather than fragmented.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace espvpn::datapath {

// Room an answer needs: IPv6 header + ICMPv6 header + as much of the original as
// the IPv6 minimum MTU allows (IPv4 answers are smaller).
inline constexpr std::size_t kTooBigMaxSize = 1280;

// Writes the ICMP error for `original` (an IP packet from the tun) into `out`
// with `mtu` as the next-hop MTU; its source is the original destination.
// Returns its size, or 0 when no answer is due (IPv4 without DF, an ICMP error
// itself, malformed) or out is smaller than kTooBigMaxSize.
std::size_t build_too_big(std::span<const std::uint8_t> original, std::size_t mtu, std::span<std::uint8_t> out);

}  // namespace espvpn::datapath
