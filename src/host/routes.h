// Which routes the built-in host setup adds around the tun, decided without
// touching the host (sans-IO, unit-tested): the gateway's host route and the
// excluded prefixes via the path they take now, then the tunnel's routes. A
// full tunnel (no split-include, or 0.0.0.0/0 / ::/0 among them) is routed as
// two halves (0.0.0.0/1 + 128.0.0.0/1, ::/1 + 8000::/1): more specific than
// the user's default route, which stays untouched, and gone with the tun.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::host {

// How the host reaches a destination before the tunnel's routes exist.
struct RoutePath {
    std::string via;         // next hop; empty: on-link
    int ifindex = 0;         // output interface
    std::string dev;         // its name, for the log
    std::string to_string() const;  // "via 10.0.0.1 dev eth0", "dev eth0"
    bool operator==(const RoutePath&) const = default;
};

// A route that must not enter the tunnel: sent the way it goes now.
struct BypassRoute {
    IpPrefix destination;
    RoutePath path;
    std::string reason;      // "gateway", "excluded"
    bool operator==(const BypassRoute&) const = default;
};

struct HostRoutePlan {
    std::vector<BypassRoute> bypass;  // added first
    std::vector<IpPrefix> tunnel;     // then these through the tun
    std::vector<std::string> notes;   // what was left out and why (INFO lines)
};

// The current path to a prefix's network address, or nullopt when the host has
// no unicast route to it (unreachable, or a local address).
using PathLookup = std::function<std::optional<RoutePath>(const IpPrefix&)>;

HostRoutePlan plan_host_routes(const TunnelConfig& config, bool disable_ipv6, const PathLookup& path_now);

// The domain-based split tunnel (session/domain_split): where one resolved address
// goes. An include goes via the tun (when the tunnel has an address of its family and
// no split-exclude prefix of the gateway covers it);
// an exclude that the kernel would send into the tun goes the way the gateway is
// reached (its path of the same family, looked up at setup), one it sends elsewhere
// already needs no route. The gateway's own addresses are never touched.
struct DomainRoutePlan {
    enum class Kind { tun, outside, none };
    Kind kind = Kind::none;
    RoutePath path;    // outside: the next hop and device
    std::string note;  // none: why no route ("already outside the tunnel", ...)
};
// `into_tun_now`: the kernel routes `address` into the tun now; `gateway_path`: how the
// gateway (of the address's family) is reached outside the tunnel, nullopt when unknown.
DomainRoutePlan plan_domain_route(const TunnelConfig& config, bool disable_ipv6, const IpPrefix& address,
                                  bool include, bool into_tun_now, const std::optional<RoutePath>& gateway_path);

// True when `prefix` covers the address `address` (same family).
bool prefix_covers(const IpPrefix& prefix, const IpPrefix& address);

}  // namespace espvpn::host
