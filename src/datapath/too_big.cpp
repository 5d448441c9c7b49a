#include "src/datapath/too_big.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "protocols/base/byte_order.h"
#include "src/io/checksum.h"
#include "src/io/tun_device.h"

namespace espvpn::datapath {

namespace {
namespace cs = io::checksum;

constexpr std::size_t kIpv4Header = 20;
constexpr std::size_t kIpv6Header = 40;
constexpr std::size_t kIcmpHeader = 8;
constexpr std::size_t kIpv4QuoteLimit = 576;  // RFC 1812: the whole error fits 576 bytes

// Is it an ICMP error (never answered with another error, RFC 1122 / RFC 4443)?
bool is_icmp_error(std::span<const std::uint8_t> pkt, std::size_t l4, std::uint8_t protocol) {
    if (pkt.size() <= l4) return false;
    const std::uint8_t type = pkt[l4];
    if (protocol == 1) return type != 0 && type != 8 && type != 13 && type != 14;  // not echo/timestamp
    if (protocol == 58) return type < 128;
    return false;
}

std::size_t too_big_v4(std::span<const std::uint8_t> in, std::size_t mtu, std::span<std::uint8_t> out) {
    if (in.size() < kIpv4Header) return 0;
    const std::size_t ihl = (in[0] & 0x0f) * 4u;
    if (ihl < kIpv4Header || in.size() < ihl) return 0;
    const bool dont_fragment = in[6] & 0x40;
    const bool first_fragment = ((in[6] & 0x1f) | in[7]) == 0;
    if (!dont_fragment || (first_fragment && is_icmp_error(in, ihl, in[9]))) return 0;
    const std::size_t quote = std::min(in.size(), kIpv4QuoteLimit - kIpv4Header - kIcmpHeader);
    const std::size_t total = kIpv4Header + kIcmpHeader + quote;
    std::uint8_t* ip = out.data();
    std::memset(ip, 0, kIpv4Header + kIcmpHeader);
    ip[0] = 0x45;
    store_be16(ip + 2, static_cast<std::uint32_t>(total));
    ip[8] = 64;  // TTL
    ip[9] = 1;   // ICMP
    std::memcpy(ip + 12, in.data() + 16, 4);  // from the unreachable destination
    std::memcpy(ip + 16, in.data() + 12, 4);  // to the sender
    cs::store(ip + 10, static_cast<std::uint16_t>(~cs::fold(cs::add(0, {ip, kIpv4Header}))));
    std::uint8_t* icmp = ip + kIpv4Header;
    icmp[0] = 3;  // destination unreachable
    icmp[1] = 4;  // fragmentation needed and DF set
    store_be16(icmp + 6, static_cast<std::uint32_t>(std::min<std::size_t>(mtu, 0xffff)));
    std::memcpy(icmp + kIcmpHeader, in.data(), quote);
    cs::store(icmp + 2, static_cast<std::uint16_t>(~cs::fold(cs::add(0, {icmp, kIcmpHeader + quote}))));
    return total;
}

std::size_t too_big_v6(std::span<const std::uint8_t> in, std::size_t mtu, std::span<std::uint8_t> out) {
    if (in.size() < kIpv6Header) return 0;
    if (is_icmp_error(in, kIpv6Header, in[6])) return 0;
    const std::size_t quote = std::min(in.size(), kTooBigMaxSize - kIpv6Header - kIcmpHeader);
    const std::size_t payload = kIcmpHeader + quote;
    std::uint8_t* ip = out.data();
    std::memset(ip, 0, kIpv6Header + kIcmpHeader);
    ip[0] = 0x60;
    store_be16(ip + 4, static_cast<std::uint32_t>(payload));
    ip[6] = 58;   // ICMPv6
    ip[7] = 64;   // hop limit
    std::memcpy(ip + 8, in.data() + 24, 16);
    std::memcpy(ip + 24, in.data() + 8, 16);
    std::uint8_t* icmp = ip + kIpv6Header;
    icmp[0] = 2;  // packet too big
    const std::uint32_t m = static_cast<std::uint32_t>(std::max<std::size_t>(mtu, 1280));
    store_be16(icmp + 4, m >> 16);
    store_be16(icmp + 6, m & 0xffff);
    std::memcpy(icmp + kIcmpHeader, in.data(), quote);
    std::uint64_t sum = cs::pseudo_header({ip + 8, 16}, {ip + 24, 16}, 58, static_cast<std::uint32_t>(payload));
    cs::store(icmp + 2, static_cast<std::uint16_t>(~cs::fold(cs::add(sum, {icmp, payload}))));
    return kIpv6Header + payload;
}
}  // namespace

std::size_t build_too_big(std::span<const std::uint8_t> original, std::size_t mtu, std::span<std::uint8_t> out) {
    if (original.empty() || out.size() < kTooBigMaxSize) return 0;
    switch (original[0] >> 4) {
        case 4: return too_big_v4(original, mtu, out);
        case 6: return too_big_v6(original, mtu, out);
        default: return 0;
    }
}

TooBigResponder::TooBigResponder(unsigned per_second)
    : buf_(new std::uint8_t[io::kVirtioNetHdrSize + kTooBigMaxSize]), per_second_(per_second) {}

bool TooBigResponder::answer(io::TunDevice& tun, std::span<const std::uint8_t> packet, std::size_t mtu) {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
        window_ = now;
        in_window_ = 0;
    }
    if (in_window_ >= per_second_) return false;
    const std::size_t hdr = tun.offloads().vnet_hdr ? io::kVirtioNetHdrSize : 0;
    std::memset(buf_.get(), 0, hdr);  // GSO_NONE, no checksum offload
    const std::size_t n = build_too_big(packet, mtu, {buf_.get() + hdr, kTooBigMaxSize});
    if (n == 0) return false;
    ++in_window_;
    return ::write(tun.fd(), buf_.get(), hdr + n) == static_cast<ssize_t>(hdr + n);
}

}  // namespace espvpn::datapath
