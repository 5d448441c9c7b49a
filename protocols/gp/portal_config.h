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

struct GpPortalConfig {
    std::string version;  // trimmed; sent back as app-version
    std::string portal_name;
    std::vector<GpGateway> gateways;  // external first, then internal, in document order
    Secret portal_userauthcookie;     // empty when absent or "empty"
    Secret portal_prelogonuserauthcookie;
    // How long the portal accepts the cookies above back (authentication override:
    // accept-cookie/cookie-lifetime, in days, hours or minutes); nullopt when it says none.
    std::optional<std::chrono::seconds> cookie_lifetime;
    std::optional<unsigned> hip_report_interval;  // seconds
    std::vector<std::string> hip_categories;
    bool has_config = true;  // false when the portal refused this client

    // External gateways sorted by priority_for(region) (stable; unprioritised
    // last). `region` is the prelogin reply's <region>; the first is the default.
    std::vector<GpGateway> preferred_gateways(std::string_view region) const;
};

Result<GpPortalConfig> parse_portal_config(const xml::Document& doc);
Result<GpAuthOutcome<GpPortalConfig>> parse_portal_config_reply(std::string_view body);

}  // namespace espvpn::gp
