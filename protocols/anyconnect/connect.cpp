#include "protocols/anyconnect/connect.h"

#include <charconv>
#include <utility>

#include "protocols/base/ascii.h"
#include "protocols/base/hex.h"
#include "protocols/http/secret_buffer.h"

namespace espvpn::anyconnect {

namespace {

Result<int> parse_seconds(std::string_view name, std::string_view value) {
    if (value == "none") return 0;
    int v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || p != value.data() + value.size() || v < 0)
        return make_error(std::string(name) + ": \"" + std::string(value) + "\" is not a number");
    return v;
}

Result<std::string> parse_ip(std::string_view name, std::string_view value, bool v6) {
    bool is_v6 = false;
    auto ip = normalise_ip(value, &is_v6);
    if (!ip || is_v6 != v6)
        return make_error(std::string(name) + ": \"" + std::string(value) + "\" is not an IPv" + (v6 ? "6" : "4") +
                          " address");
    return ip;
}

// "addr/len" or "addr/dotted-mask" (IPv4 only), either family.
Result<IpPrefix> parse_route(std::string_view name, std::string_view value) {
    auto p = IpPrefix::parse(value);
    if (!p) return make_error(std::string(name) + ": " + p.error().message);
    return p;
}

Result<std::array<std::uint8_t, 32>> parse_hex32(std::string_view name, std::string_view value) {
    auto bytes = Secret::from_hex(value);
    if (!bytes || bytes->size() != 32)
        return make_error(std::string(name) + " is not 64 hex digits");
    std::array<std::uint8_t, 32> out{};
    std::copy(bytes->reveal().begin(), bytes->reveal().end(), out.begin());
    return out;
}

}  // namespace

Result<AcRekeyMethod> parse_rekey_method(std::string_view text) {
    if (text.empty() || text == "none") return AcRekeyMethod::none;
    if (text == "ssl") return AcRekeyMethod::ssl;
    if (text == "new-tunnel") return AcRekeyMethod::new_tunnel;
    return make_error("unknown rekey method \"" + std::string(text) + "\" (known: ssl, new-tunnel, none)");
}

const char* rekey_method_name(AcRekeyMethod method) {
    switch (method) {
        case AcRekeyMethod::none: return "none";
        case AcRekeyMethod::ssl: return "ssl";
        case AcRekeyMethod::new_tunnel: return "new-tunnel";
    }
    return "?";
}

namespace {
AcRekeyMethod known_rekey_method(std::string_view text) {
    auto m = parse_rekey_method(text);
    return m ? *m : AcRekeyMethod::none;
}
}  // namespace

Result<Secret> build_connect_request(const AcConnectSettings& s, const Secret& webvpn) {
    http::Request r;
    r.method = "CONNECT";
    r.target = std::string(kTunnelPath);
    r.host = s.host;
    r.port = s.port;
    r.headers.add("User-Agent", s.user_agent);
    r.headers.add("X-CSTP-Version", "1");
    r.headers.add("X-CSTP-Hostname", s.hostname);
    r.headers.add("X-CSTP-Base-MTU", std::to_string(s.base_mtu));
    r.headers.add("X-CSTP-MTU", std::to_string(s.mtu));
    r.headers.add("X-CSTP-Address-Type", s.ipv6 ? "IPv6,IPv4" : "IPv4");
    if (!s.previous_ipv4.empty()) r.headers.add("X-CSTP-Address", s.previous_ipv4);
    if (!s.previous_ipv6.empty() && s.ipv6) r.headers.add("X-CSTP-Address", s.previous_ipv6);
    if (s.ipv6) r.headers.add("X-CSTP-Full-IPv6-Capability", "true");
    if (s.dtls) {
        if (s.dtls->master_secret.size() != 48) return make_error("the DTLS master secret must be 48 bytes");
        r.headers.add("X-DTLS-Master-Secret", hex_encode(s.dtls->master_secret.reveal()));
        r.headers.add("X-DTLS-CipherSuite", s.dtls->cipher_suites);
        if (!s.dtls->dtls12_cipher_suites.empty()) r.headers.add("X-DTLS12-CipherSuite", s.dtls->dtls12_cipher_suites);
    }
    http::SecretBuffer cookie;
    cookie.append("webvpn=");
    cookie.append(webvpn);
    r.cookie = cookie.take_secret();
    return http::serialize(r);
}

Result<AcCstpConfig> parse_connect_reply(const http::Response& response, AcConnectRefusal* refusal) {
    if (refusal) refusal->status = response.status;
    if (response.status != 200) {
        std::string msg = "the server refused the tunnel: HTTP " + std::to_string(response.status) + " " + response.reason;
        if (auto reason = response.headers.get("X-Reason")) msg += " (" + std::string(*reason) + ")";
        if (response.status == 401) msg += "; the session cookie is not (or no longer) valid";
        return make_error(msg);
    }
    AcCstpConfig c;
    TunnelConfig& t = c.tunnel;
    int dtls_mtu = 0, cstp_mtu = 0, dns4 = 0, dns6 = 0;
    std::optional<AcDtlsParams> dtls;
    bool have_id = false;
    std::vector<int> session_timeouts;
    auto d = [&]() -> AcDtlsParams& {
        if (!dtls) dtls.emplace();
        return *dtls;
    };
    for (const auto& field : response.headers.fields()) {
        // Named references, not a structured binding: clang 14 (the fuzz build) cannot
        // capture a binding in the lambdas below.
        const auto& name = field.first;
        const auto& value = field.second;
        const std::string_view n = name;
        if (istarts_with(n, "X-CSTP-")) t.protocol_options.emplace_back(name, value);
        auto is = [&](std::string_view h) { return http::iequals(n, h); };
        auto seconds = [&](int& out) -> Status {
            auto v = parse_seconds(n, value);
            if (!v) return v.error();
            out = *v;
            return {};
        };
        Status st;
        if (is("X-CSTP-Address")) {
            bool v6 = value.find(':') != std::string::npos;
            auto ip = parse_ip(n, value, v6);
            if (!ip) return ip.error();
            (v6 ? t.ip6_address : t.ip4_address) = *ip;
        } else if (is("X-CSTP-Netmask")) {
            if (value.find(':') != std::string::npos) {
                // IPv6 "net/prefix" for a v6 address given in X-CSTP-Address
                auto slash = value.find('/');
                int len = 0;
                if (slash == std::string::npos ||
                    std::from_chars(value.data() + slash + 1, value.data() + value.size(), len).ec != std::errc() ||
                    len < 1 || len > 128)
                    return make_error("X-CSTP-Netmask: \"" + value + "\" is not an IPv6 prefix");
                t.ip6_prefix = len;
            } else {
                auto ip = parse_ip(n, value, false);
                if (!ip) return ip.error();
                t.ip4_netmask = *ip;
            }
        } else if (is("X-CSTP-Address-IP6")) {
            auto slash = value.find('/');
            auto ip = parse_ip(n, std::string_view(value).substr(0, slash), true);
            if (!ip) return ip.error();
            int len = 128;
            if (slash != std::string::npos &&
                (std::from_chars(value.data() + slash + 1, value.data() + value.size(), len).ec != std::errc() ||
                 len < 1 || len > 128))
                return make_error("X-CSTP-Address-IP6: \"" + value + "\" has a bad prefix length");
            t.ip6_address = *ip;
            t.ip6_prefix = len;
        } else if (is("X-CSTP-DNS") || is("X-CSTP-DNS-IP6")) {
            bool v6 = value.find(':') != std::string::npos;
            auto ip = parse_ip(n, value, v6);
            if (!ip) return ip.error();
            if ((v6 ? dns6 : dns4)++ < 3) t.dns.push_back(*ip);
        } else if (is("X-CSTP-NBNS")) {
            auto ip = parse_ip(n, value, false);
            if (!ip) return ip.error();
            if (t.nbns.size() < 3) t.nbns.push_back(*ip);
        } else if (is("X-CSTP-Default-Domain")) {
            t.default_domain = value;
        } else if (is("X-CSTP-Split-DNS")) {
            t.split_dns.push_back(value);
        } else if (is("X-CSTP-Split-Include") || is("X-CSTP-Split-Include-IP6")) {
            auto r = parse_route(n, value);
            if (!r) return r.error();
            t.split_include.push_back(*r);
        } else if (is("X-CSTP-Split-Exclude") || is("X-CSTP-Split-Exclude-IP6")) {
            auto r = parse_route(n, value);
            if (!r) return r.error();
            t.split_exclude.push_back(*r);
        } else if (is("X-CSTP-Banner")) {
            t.banner = value;
        } else if (is("X-CSTP-MSIE-Proxy-Pac-URL")) {
            t.proxy_pac = value;
        } else if (is("X-CSTP-DPD")) {
            st = seconds(c.dpd_s);
        } else if (is("X-CSTP-Keepalive")) {
            st = seconds(c.keepalive_s);
        } else if (is("X-CSTP-Idle-Timeout")) {
            st = seconds(t.idle_timeout_s);
        } else if (is("X-CSTP-Session-Timeout") || is("X-CSTP-Session-Timeout-Remaining") ||
                   is("X-CSTP-Lease-Duration")) {
            int v = 0;
            st = seconds(v);
            if (v > 0) session_timeouts.push_back(v);
        } else if (is("X-CSTP-Rekey-Time")) {
            st = seconds(c.rekey_s);
        } else if (is("X-CSTP-Rekey-Method")) {
            c.rekey_method = value;
            c.rekey = known_rekey_method(value);
        } else if (is("X-CSTP-MTU")) {
            st = seconds(cstp_mtu);
        } else if (is("X-CSTP-Base-MTU")) {
            st = seconds(c.base_mtu);
        } else if (is("X-CSTP-Content-Encoding")) {
            c.content_encoding = value;
        } else if (is("X-DTLS-MTU")) {
            st = seconds(dtls_mtu);
        } else if (is("X-DTLS-Session-ID") || is("X-DTLS-App-ID")) {
            auto id = parse_hex32(n, value);
            if (!id) {
                c.dtls_unusable = id.error().message;
            } else {
                d().session_id = *id;
                if (is("X-DTLS-Session-ID")) d().mode = AcDtlsParams::Mode::legacy;
                have_id = true;
            }
        } else if (is("X-DTLS-CipherSuite")) {
            if (!d().dtls12_header) d().cipher_suite = value;
        } else if (is("X-DTLS12-CipherSuite")) {
            d().cipher_suite = value;
            d().dtls12_header = true;
        } else if (is("X-DTLS-Port")) {
            int port = 0;
            st = seconds(port);
            if (st && (port < 1 || port > 65535)) st = make_error("X-DTLS-Port: " + value + " is not a port");
            d().port = static_cast<std::uint16_t>(port);
        } else if (is("X-DTLS-DPD")) {
            st = seconds(d().dpd_s);
        } else if (is("X-DTLS-Keepalive")) {
            st = seconds(d().keepalive_s);
        } else if (is("X-DTLS-Rekey-Time")) {
            st = seconds(d().rekey_s);
        } else if (is("X-DTLS-Rekey-Method")) {
            d().rekey_method = value;
            d().rekey = known_rekey_method(value);
        } else if (is("X-DTLS-Content-Encoding")) {
            c.dtls_unusable = "the server chose DTLS compression " + value + ", which was not offered";
        }
        if (!st) return st.error();
    }
    if (!c.content_encoding.empty())
        return make_error("the server chose CSTP compression \"" + c.content_encoding + "\", which espvpn did not offer");
    if (t.ip4_address.empty() && t.ip6_address.empty()) return make_error("the server gave no tunnel address");
    if (cstp_mtu <= 0 && dtls_mtu <= 0) return make_error("the server gave no MTU (X-CSTP-MTU)");
    // The bounds GlobalProtect's <mtu> has too (server_mtu_in_range, tunnel_config.h).
    for (const auto& [header, mtu] : {std::pair<const char*, int>{"X-CSTP-MTU", cstp_mtu}, {"X-DTLS-MTU", dtls_mtu}})
        if (mtu > 0 && !server_mtu_in_range(mtu))
            return make_error(std::string(header) + " is " + std::to_string(mtu) + ", expected 576..9000");
    c.cstp_mtu = cstp_mtu > 0 ? cstp_mtu : dtls_mtu;
    t.mtu = std::max(cstp_mtu, dtls_mtu);
    for (int t : session_timeouts)
        if (c.session_timeout_s == 0 || t < c.session_timeout_s) c.session_timeout_s = t;
    if (dtls) {
        if (dtls_mtu > 0) dtls->mtu = dtls_mtu;
        if (!c.dtls_unusable.empty()) {
        } else if (!have_id) {
            c.dtls_unusable = "no X-DTLS-App-ID or X-DTLS-Session-ID";
        } else if (dtls->cipher_suite.empty()) {
            c.dtls_unusable = "no DTLS cipher suite chosen";
        } else if (dtls->port == 0) {
            c.dtls_unusable = "no X-DTLS-Port";
        } else {
            if (dtls->cipher_suite == kPskNegotiate) dtls->mode = AcDtlsParams::Mode::psk;
            else if (dtls->mode == AcDtlsParams::Mode::psk)
                c.dtls_unusable = "App-ID given with the legacy suite " + dtls->cipher_suite;
            if (c.dtls_unusable.empty()) c.dtls = std::move(dtls);
        }
    }
    return c;
}

}  // namespace espvpn::anyconnect
