#include "src/nm/nm_vpn_config.h"

#include <arpa/inet.h>

#include <charconv>

namespace espvpn::nm {
namespace {

const std::string* find(const ScriptEnvironment& env, const std::string& name) {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return nullptr;
    return &it->second;
}

std::optional<Ip4Address> parse_ip4(const std::string& text) {
    Ip4Address a{};
    if (inet_pton(AF_INET, text.c_str(), a.data()) != 1) return std::nullopt;
    return a;
}

std::optional<Ip6Address> parse_ip6(const std::string& text) {
    Ip6Address a{};
    if (inet_pton(AF_INET6, text.c_str(), a.data()) != 1) return std::nullopt;
    return a;
}

std::optional<std::uint32_t> parse_uint(const std::string& text, std::uint32_t max) {
    std::uint32_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v > max) return std::nullopt;
    return v;
}

// A dotted netmask's length, only when it is contiguous.
std::optional<std::uint32_t> netmask_length(const std::string& text) {
    auto mask = parse_ip4(text);
    if (!mask) return std::nullopt;
    std::uint32_t bits = (std::uint32_t{(*mask)[0]} << 24) | (std::uint32_t{(*mask)[1]} << 16) |
                         (std::uint32_t{(*mask)[2]} << 8) | (*mask)[3];
    std::uint32_t len = 0;
    while (len < 32 && (bits & (0x80000000u >> len))) ++len;
    if (len < 32 && (bits << len) != 0) return std::nullopt;
    return len;
}

std::vector<std::string> split_words(const std::string& text, const char* separators) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t start = text.find_first_not_of(separators, pos);
        if (start == std::string::npos) break;
        std::size_t end = text.find_first_of(separators, start);
        if (end == std::string::npos) end = text.size();
        out.push_back(text.substr(start, end - start));
        pos = end;
    }
    return out;
}

// The split-include routes BASE_N_ADDR/MASKLEN (or MASK) into config.routes; a /0 among
// them means everything: no routes, and NM keeps the default route on the VPN.
template <class Config, class Parse>
std::optional<NmConfigError> take_routes(const ScriptEnvironment& env, const std::string& base, Parse parse,
                                         std::uint32_t max_prefix, Config& config) {
    using Route = typename decltype(config.routes)::value_type;
    std::vector<Route> routes;
    bool full_tunnel = false;
    const std::string* count_text = find(env, base);
    if (!count_text) return std::nullopt;
    auto count = parse_uint(*count_text, 10000);
    if (!count) return NmConfigError{"Routes", base + "='" + *count_text + "' is not a route count"};
    for (std::uint32_t i = 0; i < *count; ++i) {
        const std::string item = base + "_" + std::to_string(i) + "_";
        const std::string* addr = find(env, item + "ADDR");
        if (!addr) return NmConfigError{"Routes", item + "ADDR is missing (" + base + "=" + *count_text + ")"};
        auto network = parse(*addr);
        if (!network) return NmConfigError{"Routes", item + "ADDR='" + *addr + "' is not an address"};
        std::optional<std::uint32_t> prefix;
        if (const std::string* len = find(env, item + "MASKLEN")) {
            prefix = parse_uint(*len, max_prefix);
            if (!prefix) return NmConfigError{"Routes", item + "MASKLEN='" + *len + "' is not a prefix length"};
        } else if (const std::string* mask = find(env, item + "MASK"); mask && max_prefix == 32) {
            prefix = netmask_length(*mask);
            if (!prefix) return NmConfigError{"Routes", item + "MASK='" + *mask + "' is not a contiguous netmask"};
        } else {
            prefix = max_prefix;
        }
        if (*prefix == 0) {
            full_tunnel = true;  // everything goes through the tunnel: NM's default route
            continue;
        }
        routes.push_back(Route{*network, *prefix});
    }
    config.never_default = !routes.empty() && !full_tunnel;
    config.routes = std::move(routes);
    return std::nullopt;
}

}  // namespace

std::string utf8_from_utf8_or_latin1(const std::string& text) {
    // Validate UTF-8 (shortest forms, no surrogates, <= U+10FFFF).
    bool valid = true;
    for (std::size_t i = 0; i < text.size() && valid;) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (n == 0 || i + n > text.size()) { valid = false; break; }
        std::uint32_t cp = n == 1 ? c : c & (0x7f >> n);
        for (std::size_t k = 1; k < n; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if ((cc & 0xc0) != 0x80) { valid = false; break; }
            cp = (cp << 6) | (cc & 0x3f);
        }
        static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (valid && (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) valid = false;
        i += n;
    }
    if (valid) return text;
    std::string out;
    out.reserve(text.size() * 2);
    for (unsigned char c : text) {
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            out += static_cast<char>(0xc0 | (c >> 6));
            out += static_cast<char>(0x80 | (c & 0x3f));
        }
    }
    return out;
}

std::variant<NmVpnConfig, NmConfigError> nm_config_from_script_env(const ScriptEnvironment& env) {
    NmVpnConfig config;
    NmGenericConfig& g = config.generic;

    const std::string* gateway = find(env, "VPNGATEWAY");
    if (!gateway) return NmConfigError{"VPN Gateway", "VPNGATEWAY is not set"};
    if (auto v4 = parse_ip4(*gateway)) g.gateway = *v4;
    else if (auto v6 = parse_ip6(*gateway)) g.gateway = *v6;
    else return NmConfigError{"VPN Gateway", "VPNGATEWAY='" + *gateway + "' is not an IP address"};

    const std::string* tundev = find(env, "TUNDEV");
    if (!tundev) return NmConfigError{"Tunnel Device", "TUNDEV is not set"};
    g.tundev = utf8_from_utf8_or_latin1(*tundev);

    if (const std::string* mtu = find(env, "INTERNAL_IP4_MTU")) {
        // Like NM-openconnect: an implausible MTU is left out rather than failing.
        if (auto v = parse_uint(*mtu, 20000); v && *v > 0) g.mtu = *v;
    }
    if (const std::string* banner = find(env, "CISCO_BANNER")) g.banner = utf8_from_utf8_or_latin1(*banner);
    if (const std::string* pac = find(env, "CISCO_PROXY_PAC")) g.proxy_pac = utf8_from_utf8_or_latin1(*pac);

    // DNS servers of both families arrive in INTERNAL_IP4_DNS (openconnect's contract).
    std::vector<Ip4Address> dns4;
    std::vector<Ip6Address> dns6;
    if (const std::string* dns = find(env, "INTERNAL_IP4_DNS")) {
        for (const auto& word : split_words(*dns, " ")) {
            if (auto v4 = parse_ip4(word)) dns4.push_back(*v4);
            else if (auto v6 = parse_ip6(word)) dns6.push_back(*v6);
            else return NmConfigError{"DNS", "INTERNAL_IP4_DNS entry '" + word + "' is not an IP address"};
        }
    }
    std::vector<std::string> domains;
    if (const std::string* split_dns = find(env, "CISCO_SPLIT_DNS")) domains = split_words(*split_dns, ", ");
    else if (const std::string* def = find(env, "CISCO_DEF_DOMAIN")) domains = split_words(*def, ", ");
    for (auto& d : domains) d = utf8_from_utf8_or_latin1(d);

    if (const std::string* address = find(env, "INTERNAL_IP4_ADDRESS")) {
        NmIp4Config ip4;
        auto a = parse_ip4(*address);
        if (!a) return NmConfigError{"IP4 Address", "INTERNAL_IP4_ADDRESS='" + *address + "' is not an IPv4 address"};
        ip4.address = *a;
        if (const std::string* len = find(env, "INTERNAL_IP4_NETMASKLEN")) {
            auto v = parse_uint(*len, 32);
            if (!v || *v == 0) return NmConfigError{"IP4 Prefix", "INTERNAL_IP4_NETMASKLEN='" + *len + "' is not 1..32"};
            ip4.prefix = *v;
        } else if (const std::string* mask = find(env, "INTERNAL_IP4_NETMASK")) {
            auto v = netmask_length(*mask);
            if (!v || *v == 0) return NmConfigError{"IP4 Prefix", "INTERNAL_IP4_NETMASK='" + *mask + "' is not a usable netmask"};
            ip4.prefix = *v;
        }
        ip4.dns = dns4;
        if (const std::string* nbns = find(env, "INTERNAL_IP4_NBNS")) {
            for (const auto& word : split_words(*nbns, " ")) {
                auto v = parse_ip4(word);
                if (!v) return NmConfigError{"NBNS", "INTERNAL_IP4_NBNS entry '" + word + "' is not an IPv4 address"};
                ip4.nbns.push_back(*v);
            }
        }
        ip4.domains = domains;
        if (auto e = take_routes(env, "CISCO_SPLIT_INC", parse_ip4, 32, ip4)) return *e;
        config.ip4 = std::move(ip4);
        g.has_ip4 = true;
    }

    if (const std::string* address = find(env, "INTERNAL_IP6_ADDRESS")) {
        NmIp6Config ip6;
        auto a = parse_ip6(*address);
        if (!a) return NmConfigError{"IP6 Address", "INTERNAL_IP6_ADDRESS='" + *address + "' is not an IPv6 address"};
        ip6.address = *a;
        // INTERNAL_IP6_NETMASK holds "address/prefix" despite its name.
        if (const std::string* netmask = find(env, "INTERNAL_IP6_NETMASK")) {
            auto slash = netmask->rfind('/');
            std::optional<std::uint32_t> v;
            if (slash != std::string::npos) v = parse_uint(netmask->substr(slash + 1), 128);
            if (!v || *v == 0) return NmConfigError{"IP6 Prefix", "INTERNAL_IP6_NETMASK='" + *netmask + "' has no prefix length 1..128"};
            ip6.prefix = *v;
        }
        ip6.dns = dns6;
        if (const std::string* def = find(env, "CISCO_DEF_DOMAIN")) {
            auto words = split_words(*def, ", ");
            if (!words.empty()) ip6.domain = utf8_from_utf8_or_latin1(words.front());
        }
        if (auto e = take_routes(env, "CISCO_IPV6_SPLIT_INC", parse_ip6, 128, ip6)) return *e;
        config.ip6 = std::move(ip6);
        g.has_ip6 = true;
    }

    if (!config.ip4 && !config.ip6)
        return NmConfigError{"IP4 Address", "neither INTERNAL_IP4_ADDRESS nor INTERNAL_IP6_ADDRESS is set"};
    return config;
}

}  // namespace espvpn::nm
