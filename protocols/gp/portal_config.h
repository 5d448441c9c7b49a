// The portal's getconfig reply (root <policy>): gateways to choose from and
// the cookies and HIP settings that go on to the gateway.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "crypto/secret.h"
#include "protocols/gp/auth_reply.h"

namespace espvpn::gp {

struct GpPriorityRule {
    std::string region;  // a prelogin <region> value, or "Any"
    int priority = 0;    // lower = preferred
};

struct GpGateway {
    std::string address;      // entry name: "host" or "host:port"
    std::string description;  // display label
    std::vector<GpPriorityRule> rules;  // priority-rule/entry
    std::optional<int> priority;        // plain <priority>, if any
    bool internal = false;

    // Lowest priority among the plain one and the rules named `region` or
    // "Any"; nullopt = unprioritised (sorts last).
    std::optional<int> priority_for(std::string_view region) const;
};

// internal-host-detection / internal-host-detection-v6: the portal's test for "this host is
// inside the corporate network": the reverse lookup of `address` (through the host's own
// resolver) returns `host`. Compared in ASCII case, without a trailing dot.
struct GpInternalHostCheck {
    std::string address;  // an IPv4 or IPv6 literal (validated)
    std::string host;     // the expected name, without a trailing dot
    bool ipv6 = false;
};

// Whether the name a reverse lookup returned is the one the portal expects.
bool internal_host_matches(std::string_view expected, std::string_view resolved);

struct GpPortalConfig {
    std::string version;  // trimmed; sent back as app-version
    std::string portal_name;
    std::vector<GpGateway> gateways;  // external first, then internal, in document order
    // Complete, valid internal-host-detection entries (IPv4 first); empty: no detection.
    std::vector<GpInternalHostCheck> internal_host_checks;
    // Why a detection entry the portal sent was not used (missing name, not an address...),
    // server text made printable; for a warning.
    std::vector<std::string> internal_host_check_problems;
    Secret portal_userauthcookie;     // empty when absent or "empty"
    Secret portal_prelogonuserauthcookie;
    // How long the portal accepts the cookies above back (authentication override:
    // accept-cookie/cookie-lifetime, in days, hours or minutes); nullopt when it says none.
    std::optional<std::chrono::seconds> cookie_lifetime;
    std::optional<unsigned> hip_report_interval;  // seconds
    std::vector<std::string> hip_categories;
    // gp-app-config's captive-portal-exception-timeout (seconds, 1..3600): how long a captive
    // portal's login may pass an enforced (kill-switch) network; nullopt when absent, 0 or bad.
    std::optional<unsigned> captive_portal_exception_timeout;
    bool has_config = true;  // false when the portal refused this client

    // External (or, `internal`, internal) gateways sorted by priority_for(region) (stable;
    // unprioritised last). `region` is the prelogin reply's <region>; the first is the default.
    std::vector<GpGateway> preferred_gateways(std::string_view region, bool internal = false) const;
    bool has_gateways(bool internal) const;
};

Result<GpPortalConfig> parse_portal_config(const xml::Document& doc);
Result<GpAuthOutcome<GpPortalConfig>> parse_portal_config_reply(std::string_view body);

}  // namespace espvpn::gp
