// The host side of a tunnel, whatever protocol carries its packets: the tun
// device and its configuration, by the built-in netlink setup or by the user's
// vpnc-script (pre-init before the device opens, connect once it exists,
// disconnect before it goes); built-in DNS (systemd-resolved or resolv.conf) is
// restored when it goes. Shared by the GP (ESP/HTTPS) and AnyConnect tunnels.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "src/host/dns.h"
#include "src/host/host.h"
#include "src/host/kill_switch.h"
#include "src/host/routes.h"
#include "src/host/script_env.h"
#include "src/host/script_runner.h"
#include "src/io/tun_device.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::host {

struct TunnelHostOptions {
    std::string interface_name;  // -i: name or a pre-created persistent tun
    std::string script;          // --script: vpnc-script command line ("" = built-in setup)
    int log_level = 1;           // for the script's LOG_LEVEL
    bool disable_ipv6 = false;
    // -Q/--queue-len: openconnect's packet queue limit, here the tun's txqueuelen (the
    // packets the kernel holds for the datapath to read); 0: the kernel's default.
    int queue_len = 0;
    // --kill-switch: nothing leaves outside the tunnel while this host lives (kill_switch.h),
    // except to these prefixes (--allow-lan) and the gateway's split excludes.
    bool kill_switch = false;
    std::vector<std::string> allow_lan;  // prefixes; "attached": the host's own networks
    std::vector<KillSwitchService> login_servers;  // the portal's addresses and port (a new login)
};

class TunnelHost final : public Host {
public:
    explicit TunnelHost(TunnelHostOptions options);
    ~TunnelHost() override;
    TunnelHost(const TunnelHost&) = delete;
    TunnelHost& operator=(const TunnelHost&) = delete;

    // pre-init script, the tun device, then the connect script or the built-in setup.
    Status bring_up(const TunnelConfig& config, int mtu) override;
    // Runs the script (if any) with the current configuration and waits for it.
    void run_script(ScriptReason reason) override;
    // Queues the script (in order after earlier ones) without waiting for it,
    // e.g. `reconnect`, which nothing has to wait for.
    void queue_script(ScriptReason reason) override;
    // The disconnect script, then the device goes (with our addresses and routes).
    void tear_down() override;
    // The same, but the kill switch stays (a captive portal: docs/SERVICE.md) until the next
    // bring_up replaces its rules or a tear_down() removes it.
    void tear_down_holding_kill_switch();
    bool holds_kill_switch() const { return !tun_ && kill_switch_ != nullptr; }
    // While the kill switch is held: DNS to the network's servers (nameserver lines of
    // /etc/resolv.conf and of systemd-resolved's upstream list; loopback passes anyway) and
    // TCP 80/443 to anywhere, for `seconds`. Returns what was opened, for the log.
    Result<std::string> open_captive_exception(int seconds);
    void close_captive_exception();

    // The domain-based split tunnel (session/domain_split): a host route for one resolved
    // address, via the tun (include) or the gateway's path (exclude), as plan_domain_route
    // (routes.h) decides; kept until removed or the host goes. Returns what it did ("dev
    // tun0", "via 10.201.0.1 dev eth0") or why no route was needed; an Error when the kernel
    // refused it. Built-in setup only (domain_routes_possible()).
    Result<std::string> add_domain_route(const IpPrefix& address, bool include) override;
    void remove_domain_route(const IpPrefix& address, bool include) override;
    // The built-in DNS setup made again with `forwarder` as the one server (the wildcard
    // split domains' forwarder, dns.h), or as the VPN's servers again for "".
    Status point_dns_at(const std::string& forwarder) override;
    bool domain_routes_possible() const override { return netlink_.has_value() && tun_.has_value(); }
    std::size_t domain_route_count() const override { return domain_routes_.size(); }

    Result<io::UniqueFd> open_dns_listener(const std::string& address, int port, const std::string& device) override;
    Result<io::UniqueFd> open_probe_socket(int family) override;

    io::TunDevice& tun() override { return *tun_; }
    int mtu() const override { return mtu_; }
    bool is_up() const { return tun_.has_value(); }
    // --kill-switch: the portal's addresses (known only after the login), before bring_up.
    void set_login_servers(std::vector<KillSwitchService> servers) { o_.login_servers = std::move(servers); }

private:
    Status configure_netlink();
    Status add_routes();
    Status install_kill_switch();
    void remove_bypass_routes();
    // The captive-portal probe's way around the tunnel (kill_switch.h: kProbeTable).
    void add_probe_routes();
    void refresh_probe_route(int family);
    void remove_probe_routes();
    void remove_domain_routes();
    // The path the host takes to `p` outside the tun (nullopt: none, or into the tun).
    std::optional<RoutePath> path_now(const IpPrefix& p);
    ScriptEnv script_env(ScriptReason reason) const;

    TunnelHostOptions o_;
    TunnelConfig config_;
    int mtu_ = 0;
    std::unique_ptr<ScriptRunner> scripts_;
    std::unique_ptr<KillSwitch> kill_switch_;  // goes last at tear-down
    std::unique_ptr<HostDns> dns_;  // built-in setup only; restores on tear-down
    std::optional<io::TunDevice> tun_;
    std::optional<io::RtNetlink> netlink_;  // built-in setup: routes outside the tun
    // Added outside the tun (gateway host route, excludes): removed at tear-down.
    std::vector<std::pair<io::InterfaceAddress, io::RouteNextHop>> bypass_routes_;
    // How the gateway is reached outside the tunnel, per family ([1]: IPv6), found at setup.
    std::optional<RoutePath> gateway_path_[2];
    // The captive-portal probe's table (kProbeTable): its default route per family ([1]: IPv6),
    // the host's own outside the tun, made again when it changed; and whether its rule is in.
    std::optional<io::RouteNextHop> probe_hop_[2];
    bool probe_rule_[2] = {false, false};
    struct DomainHostRoute {
        IpPrefix address;
        bool include;
        io::InterfaceAddress dst;
        io::RouteNextHop hop;  // include: dev tun; exclude: the gateway's next hop
    };
    std::vector<DomainHostRoute> domain_routes_;  // removed at tear-down
};

}  // namespace espvpn::host
