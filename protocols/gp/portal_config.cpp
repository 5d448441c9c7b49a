#include "protocols/gp/portal_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "protocols/base/ascii.h"

namespace espvpn::gp {

namespace {

std::optional<long> parse_int(std::string_view s) {
    long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

Secret cookie_value(xml::Node policy, std::string_view name) {
    Secret v = policy.child(name).text_secret();
    if (v.reveal_text() == "empty") v.clear();
    return v;
}

Result<int> parse_priority(std::string_view text, const std::string& gateway, std::string_view what) {
    auto v = parse_int(text);
    if (!v || *v < 0 || *v > 1000000)
        return make_error("portal config: gateway " + gateway + ": bad " + std::string(what) +
                          " \"" + std::string(text) + "\"");
    return static_cast<int>(*v);
}

Result<GpGateway> parse_gateway(xml::Node entry, bool internal) {
    GpGateway g;
    g.address = entry.attribute("name").value_or("");
    if (g.address.empty()) return make_error("portal config: gateway entry without a name");
    g.description = entry.child_text_or_empty("description");
    g.internal = internal;
    for (xml::Node rule : entry.child("priority-rule").children("entry")) {
        auto p = parse_priority(rule.child_text_or_empty("priority"), g.address, "priority-rule");
        if (!p) return p.error();
        g.rules.push_back({rule.attribute("name").value_or(""), *p});
    }
    if (auto text = entry.child_text("priority"); text && !text->empty()) {
        auto p = parse_priority(*text, g.address, "priority");
        if (!p) return p.error();
        g.priority = *p;
    }
    return g;
}

// authentication-override/accept-cookie/cookie-lifetime/lifetime-in-{days,hours,minutes}
// (PAN-OS names; some portals put cookie-lifetime directly under authentication-override).
// Unreadable or out of range (over a year): none, so a default applies.
std::optional<std::chrono::seconds> parse_cookie_lifetime(xml::Node policy) {
    xml::Node over = policy.child("authentication-override");
    for (const char* where : {"accept-cookie/cookie-lifetime", "cookie-lifetime"}) {
        xml::Node lifetime = over.child(where);
        for (auto [name, unit] : {std::pair{"lifetime-in-days", 86400L}, std::pair{"lifetime-in-hours", 3600L},
                                  std::pair{"lifetime-in-minutes", 60L}}) {
            auto text = lifetime.child_text(name);
            if (!text) continue;
            auto n = parse_int(*text);
            if (!n || *n <= 0 || *n * unit > 366L * 86400) return std::nullopt;
            return std::chrono::seconds(*n * unit);
        }
    }
    return std::nullopt;
}

std::string_view without_trailing_dot(std::string_view s) {
    if (!s.empty() && s.back() == '.') s.remove_suffix(1);
    return s;
}

// A DNS name as a reverse lookup can return it: letters, digits, '-', '_' and dots.
bool plausible_host_name(std::string_view s) {
    if (s.empty() || s.size() > 253) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_ascii_digit(c) || c == '-' || c == '_' ||
               c == '.';
    });
}

// One address/name pair of internal-host-detection(-v6); nothing when neither is given.
void parse_internal_check(std::optional<std::string> address, std::optional<std::string> host, std::string_view where,
                          GpPortalConfig& c) {
    std::string a(trim_blanks(address.value_or(""))), h(without_trailing_dot(trim_blanks(host.value_or(""))));
    if (a.empty() && h.empty()) return;
    auto problem = [&](const std::string& why) {
        c.internal_host_check_problems.push_back(std::string(where) + ": " + why);
    };
    if (a.empty()) return problem("no address (for the host name \"" + printable(h) + "\")");
    if (h.empty()) return problem("no host name for the address \"" + printable(a) + "\"");
    unsigned char buf[16];
    GpInternalHostCheck check;
    if (inet_pton(AF_INET, a.c_str(), buf) == 1) check.ipv6 = false;
    else if (inet_pton(AF_INET6, a.c_str(), buf) == 1) check.ipv6 = true;
    else return problem("\"" + printable(a) + "\" is not an IP address");
    if (!plausible_host_name(h)) return problem("\"" + printable(h) + "\" is not a host name");
    check.address = std::move(a);
    check.host = std::move(h);
    c.internal_host_checks.push_back(std::move(check));
}

// PAN-OS names vary between releases and tools: the address as ip-address (or ipv6-address),
// the name as host (or hostname, ipv6-host); IPv6 in its own internal-host-detection-v6 or
// as ipv6-address/ipv6-host inside internal-host-detection.
void parse_internal_host_detection(xml::Node policy, GpPortalConfig& c) {
    auto first = [](xml::Node n, std::initializer_list<const char*> names) -> std::optional<std::string> {
        for (const char* name : names)
            if (auto t = n.child_text(name)) return t;
        return std::nullopt;
    };
    xml::Node v4 = policy.child("internal-host-detection");
    parse_internal_check(v4.child_text("ip-address"), first(v4, {"host", "hostname"}), "internal-host-detection", c);
    parse_internal_check(v4.child_text("ipv6-address"), v4.child_text("ipv6-host"), "internal-host-detection", c);
    xml::Node v6 = policy.child("internal-host-detection-v6");
    parse_internal_check(first(v6, {"ip-address", "ipv6-address"}), first(v6, {"host", "hostname", "ipv6-host"}),
                         "internal-host-detection-v6", c);
}

}  // namespace

bool internal_host_matches(std::string_view expected, std::string_view resolved) {
    expected = without_trailing_dot(expected);
    resolved = without_trailing_dot(resolved);
    return !expected.empty() && iequals(expected, resolved);
}

bool GpPortalConfig::has_gateways(bool internal) const {
    return std::any_of(gateways.begin(), gateways.end(),
                       [internal](const GpGateway& g) { return g.internal == internal; });
}

std::optional<int> GpGateway::priority_for(std::string_view region) const {
    std::optional<int> best = priority;
    for (const auto& r : rules)
        if (r.region == "Any" || (!region.empty() && r.region == region))
            if (!best || r.priority < *best) best = r.priority;
    return best;
}

std::vector<GpGateway> GpPortalConfig::preferred_gateways(std::string_view region, bool internal) const {
    std::vector<std::pair<std::optional<int>, const GpGateway*>> ranked;
    for (const auto& g : gateways)
        if (g.internal == internal) ranked.emplace_back(g.priority_for(region), &g);
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
        if (a.first && b.first) return *a.first < *b.first;
        return a.first.has_value() && !b.first.has_value();
    });
    std::vector<GpGateway> out;
    for (const auto& [prio, g] : ranked) out.push_back(*g);
    return out;
}

Result<GpPortalConfig> parse_portal_config(const xml::Document& doc) {
    if (auto st = doc.expect_root("policy"); !st) return st.error();
    xml::Node p = doc.root();
    GpPortalConfig c;
    if (p.child_text_or_empty("has-config") == "no") {
        c.has_config = false;
        return c;
    }
    c.version = p.child_text_or_empty("version");
    c.portal_name = p.child_text_or_empty("portal-name");
    c.portal_userauthcookie = cookie_value(p, "portal-userauthcookie");
    c.portal_prelogonuserauthcookie = cookie_value(p, "portal-prelogonuserauthcookie");
    c.cookie_lifetime = parse_cookie_lifetime(p);
    for (auto [path, internal] : {std::pair{"gateways/external/list", false},
                                  std::pair{"gateways/internal/list", true}}) {
        for (xml::Node e : p.child(path).children("entry")) {
            auto g = parse_gateway(e, internal);
            if (!g) return g.error();
            c.gateways.push_back(std::move(*g));
            if (c.gateways.size() > 1024) return make_error("portal config: more than 1024 gateways");
        }
    }
    parse_internal_host_detection(p, c);
    if (auto v = p.child_text("hip-collection/hip-report-interval"); v && !v->empty()) {
        auto n = parse_int(*v);
        // Any number of seconds up to a week (0: none set); a short one only makes the checks
        // frequent (session/gp/hip_renewal.h), it must not cost the login.
        if (!n || *n < 0 || *n > 7 * 86400)
            return make_error("portal config: hip-report-interval \"" + *v +
                              "\" is not between 0 and 604800 seconds");
        c.hip_report_interval = static_cast<unsigned>(*n);
    }
    for (xml::Node m : p.child("hip-collection/default/category").children("member"))
        c.hip_categories.push_back(m.text());
    for (xml::Node e : p.child("gp-app-config/config").children("entry")) {
        if (e.attribute("name") != "captive-portal-exception-timeout") continue;
        auto n = parse_int(e.child_text_or_empty("value/member"));
        if (n && *n >= 1 && *n <= 3600) c.captive_portal_exception_timeout = static_cast<unsigned>(*n);
    }
    return c;
}

Result<GpAuthOutcome<GpPortalConfig>> parse_portal_config_reply(std::string_view body) {
    return parse_outcome<GpPortalConfig>(body, parse_portal_config);
}

}  // namespace espvpn::gp
