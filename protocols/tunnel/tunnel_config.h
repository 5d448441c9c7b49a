// TunnelConfig: what a login hands to the host side, whatever the protocol.
// The GlobalProtect and AnyConnect sessions fill it from their own replies; the
// vpnc-script runner, the built-in network setup and the NetworkManager plugin
// read it. Addresses are kept as validated text (they are only ever passed on).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn {

// An address and a prefix length as written, host bits kept: the one prefix grammar
// ("10.1.2.3/16", "10.1.2.3/255.255.0.0", "10.1.2.3" = /32, "fd00::5/64", "fd00::5" =
// /128; a non-contiguous dotted mask is an error). IpPrefix is it with the host bits
// cleared; an interface address (src/io/rtnetlink.h) keeps them. Errors read
// "'TEXT': what is wrong".
struct IpAddressLength {
    bool v6 = false;
    std::uint8_t bytes[16] = {};
    int length = 0;
};
Result<IpAddressLength> parse_address_length(std::string_view text);

// An IPv4 or IPv6 network: address with host bits cleared, and a prefix length.
struct IpPrefix {
    bool v6 = false;
    std::uint8_t bytes[16] = {};
    int length = 0;

    // "10.1.0.0/16", "10.1.0.0/255.255.0.0", "10.1.2.3" (= /32), "fd00::/64", "fd00::1"
    // (= /128). Host bits are cleared. A non-contiguous dotted mask is an error.
    static Result<IpPrefix> parse(std::string_view text);

    std::string address() const;  // "10.1.0.0"
    std::string netmask() const;   // IPv4 only: "255.255.0.0"
    std::string to_string() const; // "10.1.0.0/16"
    bool operator==(const IpPrefix&) const = default;
};

// Validates and normalises a numeric address ("10.0.0.1", "fd00::1").
Result<std::string> normalise_ip(std::string_view text, bool* is_v6 = nullptr);
// Dotted IPv4 netmask → prefix length, or an error if not contiguous.
Result<int> netmask_length(std::string_view dotted);

// One entry of GlobalProtect's <include-split-tunneling-domain> / <exclude-split-tunneling-domain>:
// "corp.example.com", "*.corp.example.com", either with ":443" — names (and ports) whose
// traffic goes through the tunnel, or around it.
struct SplitDomain {
    std::string name;       // lower case, without "*." and ":port"; "" for a bare "*"
    bool wildcard = false;  // written "*.name" (or "*")
    int port = 0;           // 0: any port

    // "*.corp.example.com:443" → the parts; an error for anything else.
    static Result<SplitDomain> parse(std::string_view text);
    std::string to_string() const;
    bool operator==(const SplitDomain&) const = default;
};

// The tunnel MTU a server may announce (GP <mtu>, AnyConnect X-CSTP-MTU / X-DTLS-MTU): below
// 576 IPv4 itself breaks; above 9000 no link carries it (and a CSTP frame's length field
// stops at 65535).
inline constexpr int kMinServerMtu = 576;
inline constexpr int kMaxServerMtu = 9000;
inline bool server_mtu_in_range(long long mtu) { return mtu >= kMinServerMtu && mtu <= kMaxServerMtu; }

struct TunnelConfig {
    std::string gateway_address;  // numeric address of the peer we connected to
    // With --proxy: the server's own address, where ESP/DTLS go directly ("" otherwise); kept
    // off the tunnel like the gateway.
    std::string direct_udp_address;

    std::string ip4_address;      // empty when the tunnel has no IPv4
    std::string ip4_netmask;      // dotted, empty when unknown
    std::string ip6_address;      // empty when the tunnel has no IPv6
    int ip6_prefix = 128;
    int mtu = 0;

    std::vector<std::string> dns;   // IPv4 and IPv6 servers, in the server's order
    std::vector<std::string> nbns;
    std::string default_domain;     // may hold several, space-separated
    std::vector<std::string> split_dns;
    std::string banner;
    std::string proxy_pac;
    int idle_timeout_s = 0;         // 0: none

    std::vector<IpPrefix> split_include;  // both families; empty: default route
    std::vector<IpPrefix> split_exclude;
    // GP's domain-based split tunnel, as the gateway sent it (AnyConnect has none).
    std::vector<SplitDomain> split_include_domains;
    std::vector<SplitDomain> split_exclude_domains;

    // Protocol headers worth passing on verbatim (AnyConnect's X-CSTP-*), in order.
    std::vector<std::pair<std::string, std::string>> protocol_options;
};

}  // namespace espvpn
