#include "protocols/gp/tunnel_config.h"

#include <algorithm>
#include <charconv>

namespace espvpn::gp {

namespace {

constexpr std::size_t kMaxRoutes = 4096;
constexpr std::size_t kMaxDns = 3;
constexpr std::size_t kMaxSplitDomains = 1024;

std::string err_field(std::string_view field, std::string_view what) {
    return "gateway config: <" + std::string(field) + "> " + std::string(what);
}

// Canonical text of an address of the given family, or nullopt.
std::optional<std::string> canonical(std::string_view text, bool ipv6) {
    bool v6 = false;
    auto a = normalise_ip(text, &v6);
    if (!a || v6 != ipv6) return std::nullopt;
    return std::move(*a);
}

std::optional<unsigned long> parse_uint(std::string_view s, int base = 10) {
    if (s.empty()) return std::nullopt;
    unsigned long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

Result<unsigned> seconds(xml::Node r, std::string_view name) {
    auto v = r.child_text(name);
    if (!v || v->empty()) return 0u;
    auto n = parse_uint(*v);
    if (!n || *n > 10UL * 365 * 86400) return make_error(err_field(name, "is not a sane number of seconds: \"" + *v + "\""));
    return static_cast<unsigned>(*n);
}

Status parse_routes(xml::Node r, std::string_view name, std::vector<IpPrefix>& out) {
    for (xml::Node m : r.child(name).children("member")) {
        std::string t = m.text();
        if (t.empty()) continue;
        auto p = IpPrefix::parse(t);  // "10.0.0.0/8", "10.0.0.0/255.0.0.0", "10.0.0.53", "fd00::/64"
        if (!p) return make_error(err_field(name, p.error().message));
        if (out.size() >= kMaxRoutes)
            return make_error("gateway config: more than " + std::to_string(kMaxRoutes) + " routes");
        out.push_back(*p);
    }
    return {};
}

// CISCO_CSTP_OPTIONS as openconnect 9.01 fills it for GlobalProtect: one NAME=value line per
// item of the getconfig, in the usual element order, newest first (it prepends).
std::vector<std::pair<std::string, std::string>> cstp_options(const TunnelConfig& c,
                                                              const std::vector<IpPrefix>& include,
                                                              const std::vector<IpPrefix>& exclude,
                                                              const std::string& quarantine) {
    std::vector<std::pair<std::string, std::string>> opts;
    auto v6 = [](const std::string& a) { return a.find(':') != std::string::npos; };
    if (!c.ip4_address.empty()) opts.emplace_back("ipaddr", c.ip4_address);
    if (!c.ip4_netmask.empty()) opts.emplace_back("netmask", c.ip4_netmask);
    for (const auto& d : c.dns)
        if (!v6(d)) opts.emplace_back("DNS", d);
    for (const auto& w : c.nbns) opts.emplace_back("WINS", w);
    if (!c.default_domain.empty()) opts.emplace_back("search", c.default_domain);
    for (const auto& r : include)
        if (!r.v6 && r.length != 0) opts.emplace_back("split-include", r.to_string());
    for (const auto& r : exclude)
        if (!r.v6) opts.emplace_back("split-exclude", r.to_string());
    if (!c.ip6_address.empty()) opts.emplace_back("ipaddr6", c.ip6_address);
    for (const auto& d : c.dns)
        if (v6(d)) opts.emplace_back("DNS", d);
    // openconnect 9.01 lists <access-routes-v6> as split-exclude (and excludes them); they are includes.
    for (const auto& r : include)
        if (r.v6 && r.length != 0) opts.emplace_back("split-include", r.to_string());
    for (const auto& r : exclude)
        if (r.v6) opts.emplace_back("split-exclude", r.to_string());
    std::reverse(opts.begin(), opts.end());
    if (!quarantine.empty() && quarantine != "no") opts.emplace_back("quarantine", quarantine);
    return opts;
}

Result<GpEspDirection> parse_sa(xml::Node ipsec, std::string_view dir, std::size_t enc_len,
                               std::size_t auth_len) {
    GpEspDirection d;
    const std::string spi_name = std::string(dir) + "-spi";
    std::string spi_text = ipsec.child_text_or_empty(spi_name);
    std::string_view hex = spi_text;
    if (hex.size() > 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
    auto spi = parse_uint(hex, 16);  // OC reads SPIs as hex, with or without 0x
    if (!spi || *spi > 0xFFFFFFFFUL)
        return make_error(err_field("ipsec/" + spi_name, "is not a 32-bit hex SPI: \"" + spi_text + "\""));
    if (*spi < 256)  // RFC 4303: 0 is reserved, 1..255 are reserved by IANA
        return make_error(err_field("ipsec/" + spi_name, "is a reserved SPI: \"" + spi_text + "\""));
    d.spi = static_cast<std::uint32_t>(*spi);

    auto key = [&](std::string_view kind, std::size_t want) -> Result<Secret> {
        const std::string name = "ipsec/" + std::string(kind) + "-" + std::string(dir);
        xml::Node k = ipsec.child(name.substr(6));
        if (!k) return make_error("gateway config: missing element <" + name + ">");
        auto bits = parse_uint(k.child_text_or_empty("bits"));
        if (!bits || *bits % 8 != 0 || *bits / 8 != want)
            return make_error(err_field(name + "/bits", "is \"" + k.child_text_or_empty("bits") +
                                                            "\", expected " + std::to_string(want * 8)));
        Secret val = k.child("val").text_secret();
        auto bytes = Secret::from_hex(val.reveal_text());
        if (!bytes) return make_error(err_field(name + "/val", "is not hex"));
        if (bytes->size() != want)
            return make_error(err_field(name + "/val", "holds " + std::to_string(bytes->size()) +
                                                          " bytes, expected " + std::to_string(want)));
        return std::move(*bytes);
    };
    auto ek = key("ekey", enc_len);
    if (!ek) return ek.error();
    d.enc_key = std::move(*ek);
    if (auth_len) {
        auto ak = key("akey", auth_len);
        if (!ak) return ak.error();
        d.auth_key = std::move(*ak);
    }
    return d;
}

Result<GpIpsecConfig> parse_ipsec(xml::Node ipsec) {
    GpIpsecConfig c;
    std::string port = ipsec.child_text_or_empty("udp-port");
    auto p = parse_uint(port);
    if (!p || *p == 0 || *p > 65535)
        return make_error(err_field("ipsec/udp-port", "is not a UDP port: \"" + port + "\""));
    c.udp_port = static_cast<std::uint16_t>(*p);
    if (auto mode = ipsec.child_text("ipsec-mode"); mode && !mode->empty()) c.mode = *mode;
    if (c.mode != "esp-tunnel")
        return make_error(err_field("ipsec/ipsec-mode", "is \"" + c.mode + "\", only esp-tunnel is supported"));
    c.enc_algo = ipsec.child_text_or_empty("enc-algo");
    if (c.enc_algo == "aes128") c.enc_algo = "aes-128-cbc";  // old spelling
    if (c.enc_algo == "aes256") c.enc_algo = "aes-256-cbc";
    auto enc_len = enc_key_bytes(c.enc_algo);
    if (!enc_len) return make_error(err_field("ipsec/enc-algo", "names an unsupported cipher \"" + c.enc_algo + "\""));
    const bool aead = c.enc_algo.find("gcm") != std::string::npos;
    std::size_t auth_len = 0;
    if (!aead) {
        c.hmac_algo = ipsec.child_text_or_empty("hmac-algo");
        auto a = auth_key_bytes(c.hmac_algo);
        if (!a) return make_error(err_field("ipsec/hmac-algo", "names an unsupported HMAC \"" + c.hmac_algo + "\""));
        auth_len = *a;
    }
    auto c2s = parse_sa(ipsec, "c2s", *enc_len, auth_len);
    if (!c2s) return c2s.error();
    auto s2c = parse_sa(ipsec, "s2c", *enc_len, auth_len);
    if (!s2c) return s2c.error();
    c.c2s = std::move(*c2s);
    c.s2c = std::move(*s2c);
    return c;
}

}  // namespace

std::optional<std::size_t> enc_key_bytes(std::string_view enc_algo) {
    // GCM on GP is unverified (docs/protocols/globalprotect.md §16); we expect RFC 4106 key||salt.
    if (enc_algo == "aes-128-cbc") return 16;
    if (enc_algo == "aes-256-cbc") return 32;
    if (enc_algo == "aes-128-gcm") return 20;
    if (enc_algo == "aes-256-gcm") return 36;
    return std::nullopt;
}

std::optional<std::size_t> auth_key_bytes(std::string_view hmac_algo) {
    if (hmac_algo == "sha1") return 20;
    if (hmac_algo == "md5") return 16;
    if (hmac_algo == "sha256") return 32;
    return std::nullopt;
}

Result<GpTunnelConfig> parse_tunnel_config(const xml::Document& doc) {
    if (auto st = doc.expect_root("response"); !st) return st.error();
    xml::Node r = doc.root();
    GpTunnelConfig c;
    TunnelConfig& t = c.tunnel;

    std::string ip = r.child_text_or_empty("ip-address");
    auto ip4 = canonical(ip, false);
    if (!ip4) return make_error(ip.empty() ? "gateway config: missing element <response/ip-address>"
                                           : err_field("ip-address", "is not an IPv4 address: \"" + ip + "\""));
    t.ip4_address = *ip4;

    if (auto nm = r.child_text("netmask"); nm && !nm->empty()) {
        auto m = canonical(*nm, false);
        if (!m) return make_error(err_field("netmask", "is not an IPv4 netmask: \"" + *nm + "\""));
        if (!netmask_length(*m)) return make_error(err_field("netmask", "is not contiguous: \"" + *nm + "\""));
        t.ip4_netmask = *m;
    }
    if (auto v6 = r.child_text("ip-address-v6"); v6 && !v6->empty()) {
        auto a = canonical(*v6, true);
        if (!a) return make_error(err_field("ip-address-v6", "is not an IPv6 address: \"" + *v6 + "\""));
        t.ip6_address = *a;
        if (auto nm6 = r.child_text("netmask-v6"); nm6 && !nm6->empty()) {
            auto n = parse_uint(*nm6);
            if (!n || *n > 128) return make_error(err_field("netmask-v6", "is not a prefix length: \"" + *nm6 + "\""));
            if (*n) t.ip6_prefix = static_cast<int>(*n);
        }
    }

    if (auto mtu = r.child_text("mtu"); mtu && !mtu->empty()) {
        auto n = parse_uint(*mtu);
        if (!n || (*n != 0 && !server_mtu_in_range(static_cast<long long>(*n))))
            return make_error(err_field("mtu", "is \"" + *mtu + "\", expected 0 or 576..9000"));
        t.mtu = static_cast<int>(*n);  // 0 = not given: the data path computes it
    }

    for (std::string_view list : {"dns", "dns-v6"}) {
        for (xml::Node m : r.child(list).children("member")) {
            std::string text = m.text();
            if (text.empty()) continue;
            auto a = normalise_ip(text);
            if (!a) return make_error(err_field(std::string(list) + "/member", "is not an IP address: \"" + text + "\""));
            if (t.dns.size() < kMaxDns && std::find(t.dns.begin(), t.dns.end(), *a) == t.dns.end())
                t.dns.push_back(*a);
        }
    }
    for (xml::Node m : r.child("wins").children("member")) {
        std::string text = m.text();
        if (text.empty()) continue;
        auto a = canonical(text, false);
        if (!a) return make_error(err_field("wins/member", "is not an IPv4 address: \"" + text + "\""));
        if (t.nbns.size() < kMaxDns) t.nbns.push_back(*a);
    }
    std::size_t domains = 0;
    for (xml::Node m : r.child("dns-suffix").children("member")) {
        std::string text = m.text();
        if (text.empty()) continue;
        if (text.size() > 253 || text.find_first_of(" \t\r\n;,\"'\\") != std::string::npos)
            return make_error(err_field("dns-suffix/member", "is not a domain name: \"" + text.substr(0, 64) + "\""));
        if (domains++ < 64) t.default_domain += (t.default_domain.empty() ? "" : " ") + text;
    }

    for (auto [list, out] : {std::pair{"include-split-tunneling-domain", &t.split_include_domains},
                             std::pair{"exclude-split-tunneling-domain", &t.split_exclude_domains}}) {
        for (xml::Node m : r.child(list).children("member")) {
            std::string text = m.text();
            if (text.empty()) continue;
            auto d = SplitDomain::parse(text);
            if (!d) return make_error(err_field(std::string(list) + "/member", d.error().message));
            if (out->size() < kMaxSplitDomains && std::find(out->begin(), out->end(), *d) == out->end())
                out->push_back(std::move(*d));
        }
    }

    std::vector<IpPrefix> include, exclude;
    for (std::string_view list : {"access-routes", "access-routes-v6"})
        if (auto st = parse_routes(r, list, include); !st) return st.error();
    for (std::string_view list : {"exclude-access-routes", "exclude-access-routes-v6"})
        if (auto st = parse_routes(r, list, exclude); !st) return st.error();
    c.default_route = include.empty() ||
                      std::any_of(include.begin(), include.end(), [](const IpPrefix& p) { return p.length == 0; });
    if (!c.default_route) t.split_include = include;  // empty: everything through the tunnel
    t.split_exclude = exclude;

    if (auto gw = r.child_text("gw-address"); gw && !gw->empty()) {
        auto a = canonical(*gw, false);
        if (!a) return make_error(err_field("gw-address", "is not an IPv4 address: \"" + *gw + "\""));
        if (*a != "0.0.0.0") c.gw_address = *a;  // some SaaS gateways send 0.0.0.0
    }
    if (auto gw = r.child_text("gw-address-v6"); gw && !gw->empty()) {
        auto a = canonical(*gw, true);
        if (!a) return make_error(err_field("gw-address-v6", "is not an IPv6 address: \"" + *gw + "\""));
        if (*a != "::") c.gw_address_v6 = *a;
    }
    c.connected_gw_ip = r.child_text_or_empty("connected-gw-ip");
    if (auto url = r.child_text("ssl-tunnel-url"); url && !url->empty()) {
        if ((*url)[0] != '/' || url->find_first_of(" \r\n?#") != std::string::npos)
            return make_error(err_field("ssl-tunnel-url", "is not an absolute path: \"" + *url + "\""));
        c.ssl_tunnel_url = *url;
    }
    unsigned idle = 0;
    for (auto [name, field] : {std::pair{"timeout", &c.timeout}, std::pair{"lifetime", &c.lifetime},
                               std::pair{"disconnect-on-idle", &idle},
                               std::pair{"hip-report-interval", &c.hip_report_interval}}) {
        auto v = seconds(r, name);
        if (!v) return v.error();
        *field = *v;
    }
    t.idle_timeout_s = static_cast<int>(idle);
    c.quarantine = r.child_text_or_empty("quarantine");
    t.protocol_options = cstp_options(t, include, exclude, c.quarantine);

    if (xml::Node ipsec = r.child("ipsec")) {
        auto i = parse_ipsec(ipsec);
        if (!i) return i.error();
        c.ipsec = std::move(*i);
    }
    return c;
}

Result<GpAuthOutcome<GpTunnelConfig>> parse_tunnel_config_reply(std::string_view body) {
    return parse_outcome<GpTunnelConfig>(body, parse_tunnel_config);
}

}  // namespace espvpn::gp
