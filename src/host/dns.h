// The VPN's DNS servers and domains applied to the host by the built-in setup
// (without --script), and taken back when the HostDns value is destroyed:
//   - systemd-resolved over D-Bus when its bus name is owned: per-link servers and
//     domains on the tun (SetLinkDNS, SetLinkDomains, SetLinkDefaultRoute), undone
//     with RevertLink;
//   - otherwise /etc/resolv.conf rewritten in place, the original put back on exit
//     (unless someone else changed the file meanwhile: then it is left alone) and
//     kept meanwhile in /run/espvpn/resolv.conf.PID: an espvpn that finds the file of
//     a dead espvpn (killed, crashed) restores that one's original.
// Both keep what they opened while privileged (the bus connection, whose peer
// credentials the daemon recorded at connect time; the file descriptor), so the
// restore still works after --setuid.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::host {

struct DnsSettings {
    std::string interface_name;
    int ifindex = 0;
    std::vector<std::string> servers;          // numeric, IPv4 and IPv6, in the server's order
    std::vector<std::string> search_domains;   // CISCO_DEF_DOMAIN's words (also routed to the VPN)
    std::vector<std::string> routing_domains;  // routing-only ("~name"): these names go to the VPN
    bool default_route = false;                // every name goes to the VPN's servers ("~.")
    bool full_tunnel = false;                  // no split-include route: all traffic in the tunnel
    int vpn_pid = 0;
};

struct HostDnsOptions {
    bool try_resolved = true;
    std::string resolv_conf = "/etc/resolv.conf";
    // Where the resolv.conf backend keeps the original while it is applied
    // (resolv.conf.PID), so that the next espvpn can undo a killed one's file. "" = none.
    std::string backup_dir = "/run/espvpn";
};

class HostDns {
public:
    virtual ~HostDns() = default;  // restores what apply() changed
    virtual std::string_view method() const = 0;

    // systemd-resolved when present, else resolv.conf.
    static Result<std::unique_ptr<HostDns>> apply(const DnsSettings& settings,
                                                  const HostDnsOptions& options = {});
};

// What the built-in setup asks for (espvpn(8), section DNS): the servers; CISCO_DEF_DOMAIN's words as
// search domains; AnyConnect's split-DNS names and GP's plain include-split-tunneling-domain
// names (those not searched already, each once) as routing domains; all names to the VPN
// (default_route) in a full tunnel whatever domains come with it, and in a split tunnel only
// when the gateway names no domain at all.
// With `forwarder` (the wildcard split domains' DNS forwarder, session/domain_split): that
// one server, and the wildcard entries' domains routed to it too ("*" routes every name).
DnsSettings built_in_dns_settings(const TunnelConfig& config, const std::string& interface_name, int ifindex,
                                  int vpn_pid, const std::string& forwarder = "");

// The rewritten resolv.conf: the VPN's servers (at most 3, the resolver's limit),
// its search domains before the old ones, the old file's other lines (options,
// sortlist) kept; the old nameservers are dropped so queries do not leak past the VPN.
std::string compose_resolv_conf(std::string_view original, const DnsSettings& settings);

}  // namespace espvpn::host
