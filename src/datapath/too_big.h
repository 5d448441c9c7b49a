// The answer to an inner packet larger than the tunnel MTU: an ICMP
// "fragmentation needed" (IPv4 with DF) or ICMPv6 "packet too big", written back
// into the tun so the sender's kernel learns the path MTU (as a router would).
// IPv4 packets without DF are dropped (and counted) rather than fragmented.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace espvpn::io {
class TunDevice;
}

namespace espvpn::datapath {

// Room an answer needs: IPv6 header + ICMPv6 header + as much of the original as
// the IPv6 minimum MTU allows (IPv4 answers are smaller).
inline constexpr std::size_t kTooBigMaxSize = 1280;

// Writes the ICMP error for `original` (an IP packet from the tun) into `out`
// with `mtu` as the next-hop MTU; its source is the original destination.
// Returns its size, or 0 when no answer is due (IPv4 without DF, an ICMP error
// itself, malformed) or out is smaller than kTooBigMaxSize.
std::size_t build_too_big(std::span<const std::uint8_t> original, std::size_t mtu, std::span<std::uint8_t> out);

// Writes those answers into the tun, at most per_second of them a second (the
// rest of a flood is dropped silently). Rare, so a direct write(2) is fine.
// Used by one tx thread.
class TooBigResponder {
public:
    explicit TooBigResponder(unsigned per_second);
    // True when an answer for `packet` (larger than mtu) was written.
    bool answer(io::TunDevice& tun, std::span<const std::uint8_t> packet, std::size_t mtu);

private:
    std::unique_ptr<std::uint8_t[]> buf_;  // virtio header + answer
    unsigned per_second_;
    std::chrono::steady_clock::time_point window_;
    unsigned in_window_ = 0;
};

}  // namespace espvpn::datapath
