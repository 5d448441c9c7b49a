// GlobalProtect internal host detection, as the official client does it: the portal
// config names an address and the host name its reverse lookup must return
// (internal-host-detection, IPv4 and IPv6). When the host's own resolver (NSS:
// /etc/hosts, DNS, ...) gives that name, this host is inside the corporate network
// and the portal's internal gateways apply; otherwise it is outside.
//
// Each lookup runs on a thread of its own; the caller waits at most `budget` (a
// resolver that never answers means "outside"). A lookup still running then is left
// to finish on its own thread: getnameinfo cannot be cancelled, and waiting for the
// resolver's own timeouts (seconds per server and attempt) is what the budget is for.
// Only the login waits for this; the packet path never does.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/gp/portal_config.h"

namespace espvpn::session {

struct InternalVerdict {
    bool inside = false;
    // One line for the log: "inside the corporate network: 10.0.0.1 resolves to
    // gw.corp.example", "outside the corporate network: 10.0.0.1 resolves to x,
    // expected y", "... no answer for 10.0.0.1 within 3 s".
    std::string reason;
};

// The reverse lookup of an IP literal: the name, or why there is none.
using ReverseLookup = std::function<Result<std::string>(const std::string& address)>;

// getnameinfo(NI_NAMEREQD) through the host's resolver.
Result<std::string> resolver_reverse_lookup(const std::string& address);

// Inside when any check's lookup returns its expected name (case-insensitive, no
// trailing dot) within `budget`. `checks` must not be empty.
InternalVerdict detect_internal_network(const std::vector<gp::GpInternalHostCheck>& checks,
                                        std::chrono::milliseconds budget,
                                        ReverseLookup lookup = resolver_reverse_lookup);

}  // namespace espvpn::session
