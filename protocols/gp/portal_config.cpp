#include "protocols/gp/portal_config.h"

#include <algorithm>
#include <charconv>

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

}  // namespace

std::optional<int> GpGateway::priority_for(std::string_view region) const {
    std::optional<int> best = priority;
    for (const auto& r : rules)
        if (r.region == "Any" || (!region.empty() && r.region == region))
            if (!best || r.priority < *best) best = r.priority;
    return best;
}

std::vector<GpGateway> GpPortalConfig::preferred_gateways(std::string_view region) const {
    std::vector<std::pair<std::optional<int>, const GpGateway*>> ranked;
    for (const auto& g : gateways)
        if (!g.internal) ranked.emplace_back(g.priority_for(region), &g);
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
    if (std::none_of(c.gateways.begin(), c.gateways.end(),
                     [](const GpGateway& g) { return !g.internal; }))
        return make_error("portal config lists no external gateway (policy/gateways/external/list)");
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
    return c;
}

Result<GpAuthOutcome<GpPortalConfig>> parse_portal_config_reply(std::string_view body) {
    return parse_outcome<GpPortalConfig>(body, parse_portal_config);
}

}  // namespace espvpn::gp
