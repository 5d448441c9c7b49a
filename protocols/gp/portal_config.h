// The portal's getconfig reply (root <policy>): gateways to choose from and
// the cookies and HIP settings that go on to the gateway.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "crypto/secret.h"
#include "protocols/gp/auth_reply.h"

namespace espvpn::gp {

struct GpGateway {
    std::string address;      // entry name: "host" or "host:port"
    std::string description;  // display label
    // Lowest priority among the rules named after the region or "Any";
    // nullopt = unprioritised (sorts last).
    std::optional<int> priority;
    bool internal = false;
};

struct GpPortalConfig {
    std::string version;  // trimmed; sent back as app-version
    std::string portal_name;
    std::vector<GpGateway> gateways;  // external first, then internal, in document order
    Secret portal_userauthcookie;     // empty when absent or "empty"
    Secret portal_prelogonuserauthcookie;
    std::optional<unsigned> hip_report_interval;  // seconds
    std::vector<std::string> hip_categories;
    bool has_config = true;  // false when the portal refused this client

    // External gateways sorted by priority (stable; unprioritised last).
    std::vector<GpGateway> preferred_gateways() const;
};

// `region` comes from the prelogin reply and selects the priority rules.
Result<GpPortalConfig> parse_portal_config(const xml::Document& doc, std::string_view region);
Result<GpAuthOutcome<GpPortalConfig>> parse_portal_config_reply(std::string_view body,
                                                                std::string_view region);

}  // namespace espvpn::gp
