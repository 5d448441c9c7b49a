// The kill switch (--kill-switch): while espvpn runs, an nftables table of its
// own lets IP traffic leave or enter only through the tunnel, to and from the
// gateway, on loopback, for DHCP and IPv6 neighbour discovery, to the portal's
// addresses on its TCP port, and to the prefixes the user allows (--allow-lan).
// The table stays while espvpn reconnects (fail closed) and goes at a clean exit;
// one that a killed espvpn left behind is found, reported and replaced (or
// removed) by the next start.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::host {

inline constexpr const char* kKillSwitchTable = "espvpn_kill_switch";  // family inet

// The captive-portal probe's sockets (Host::open_probe_socket) carry this mark: the kill switch
// lets them through to TCP port 80, and a policy rule (priority kProbeRulePriority) sends them
// by table kProbeTable, where the default route is the gateway's path outside the tunnel: the
// probe sees the network even while the tunnel's routes are there and its link is down.
inline constexpr std::uint32_t kProbeMark = 0x65737076;  // "espv"
inline constexpr std::uint32_t kProbeTable = 0x65737076;
inline constexpr std::uint32_t kProbeRulePriority = 1100;

// A server the rules let through by address and TCP port only: the portal (login server) when
// it is not the gateway, so that a new login to it is not blocked.
struct KillSwitchService {
    std::string address;  // numeric
    int port = 443;
};

struct KillSwitchRules {
    std::string tun_name;
    std::vector<std::string> peers;     // numeric addresses: the gateway (or proxy), the direct UDP peer
    std::vector<KillSwitchService> tcp_services;  // the portal's addresses: TCP to its port only
    std::vector<IpPrefix> allowed;      // --allow-lan prefixes and the gateway's split excludes
    int pid = 0;                        // written into the table's comment
};

// The nft script that replaces (or creates) the table atomically. Pure, for tests.
std::string kill_switch_script(const KillSwitchRules& rules);
// The nft script that opens the captive-portal exception (sets captive_tcp, captive_dns4,
// captive_dns6 of the table). Pure, for tests; addresses that are not numeric are left out.
std::string captive_exception_script(const std::vector<std::string>& dns_servers, int seconds);

// The prefixes of this host's own addresses outside `tun_name` and loopback
// (what a bare --allow-lan allows: the directly attached networks).
std::vector<IpPrefix> attached_networks(const std::string& tun_name);

// A table left behind: the pid in its comment (0 if unreadable); nullopt when
// there is none.
std::optional<int> kill_switch_left_behind();

class KillSwitch {
public:
    // Installs the rules (replacing a leftover table, which is reported).
    static Result<std::unique_ptr<KillSwitch>> install(const KillSwitchRules& rules);
    // New rules for the table this object holds (a new session after a captive portal), in one
    // transaction: no packet passes between the two; an open captive-portal exception is gone.
    Status replace(const KillSwitchRules& rules);
    // A captive portal's login (docs/SERVICE.md): for `seconds`, TCP to ports 80 and 443 of any
    // address and DNS (UDP and TCP 53) to `dns_servers` (numeric) pass too. The kernel drops
    // the set elements by itself when the time is up (nftables timeouts); close_captive_exception
    // empties them at once.
    Status open_captive_exception(const std::vector<std::string>& dns_servers, int seconds);
    Status close_captive_exception();
    // Removes the table: traffic flows outside the tunnel again.
    ~KillSwitch();
    KillSwitch(const KillSwitch&) = delete;
    KillSwitch& operator=(const KillSwitch&) = delete;

private:
    KillSwitch() = default;
};

// Without --kill-switch: a leftover table would block this run's traffic, so it is
// reported and removed. Returns what was done, for the log ("" when there was none).
std::string remove_left_behind_kill_switch();

}  // namespace espvpn::host
