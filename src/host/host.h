// The host side of a tunnel as the session sees it: what the session core, the drivers
// and the domain split ask of the machine (the tun, scripts, routes, DNS, sockets that
// need a capability). Two implementations: TunnelHost (tunnel_host.h) does it in this
// process; BrokerHost (broker_client.h) asks the privileged broker process, which holds
// a TunnelHost, over a socketpair (protocols/broker).
#pragma once

#include <cstddef>
#include <string>

#include "protocols/base/result.h"
#include "protocols/tunnel/tunnel_config.h"
#include "src/host/script_env.h"
#include "src/io/tun_device.h"
#include "src/io/unique_fd.h"

namespace espvpn::host {

class Host {
public:
    virtual ~Host() = default;

    // pre-init script, the tun device, then the connect script or the built-in setup.
    virtual Status bring_up(const TunnelConfig& config, int mtu) = 0;
    // Runs the script (if any) with the current configuration and waits for it.
    virtual void run_script(ScriptReason reason) = 0;
    // Queues the script (in order after earlier ones) without waiting for it.
    virtual void queue_script(ScriptReason reason) = 0;
    // The disconnect script, then the device goes (with our addresses and routes).
    virtual void tear_down() = 0;
    // A captive portal stands before the gateway (docs/SERVICE.md): the coming tear-down keeps
    // the kill switch up (the next session's bring_up replaces its rules; the end of espvpn
    // removes it). false: this host cannot (its kill switch goes with it).
    virtual bool hold_kill_switch() { return false; }
    // A TCP socket (non-blocking) for the captive-portal probe, marked kProbeMark (kill_switch.h):
    // past the kill switch to port 80 and around the tunnel's routes. Needs CAP_NET_ADMIN.
    virtual Result<io::UniqueFd> open_probe_socket(int family) = 0;

    // The domain-based split tunnel's host routes (TunnelHost::add_domain_route).
    virtual Result<std::string> add_domain_route(const IpPrefix& address, bool include) = 0;
    virtual void remove_domain_route(const IpPrefix& address, bool include) = 0;
    // The built-in DNS pointed at `forwarder` ("" = the VPN's servers again).
    virtual Status point_dns_at(const std::string& forwarder) = 0;
    virtual bool domain_routes_possible() const = 0;
    virtual std::size_t domain_route_count() const = 0;
    // The domain split's forwarder socket: UDP bound to address:port (53 needs
    // CAP_NET_BIND_SERVICE), to `device` when not "".
    virtual Result<io::UniqueFd> open_dns_listener(const std::string& address, int port, const std::string& device) = 0;

    // After bring_up: the tun (its set_mtu goes through the host) and its MTU.
    virtual io::TunDevice& tun() = 0;
    virtual int mtu() const = 0;
};

}  // namespace espvpn::host
