#include "src/session/tunnel_host.h"

#include <unistd.h>

#include "src/log/logger.h"

namespace espvpn::session {

TunnelHost::TunnelHost(TunnelHostOptions options) : o_(std::move(options)) {
    if (!o_.script.empty()) scripts_ = std::make_unique<hooks::ScriptRunner>(o_.script);
}

TunnelHost::~TunnelHost() { tear_down(); }

hooks::ScriptEnv TunnelHost::script_env(hooks::ScriptReason reason) const {
    TunnelConfig c = config_;
    c.mtu = mtu_;
    hooks::ScriptContext ctx{reason, tun_ ? tun_->name() : o_.interface_name, static_cast<int>(getpid()),
                             o_.log_level};
    return hooks::build_script_env(c, ctx);
}

void TunnelHost::run_script(hooks::ScriptReason reason) {
    if (!scripts_) return;
    // Awaited by the control thread only; the packet threads keep forwarding meanwhile.
    scripts_->run(script_env(reason)).wait();
}

void TunnelHost::queue_script(hooks::ScriptReason reason) {
    if (scripts_) scripts_->run(script_env(reason));
}

Status TunnelHost::bring_up(const TunnelConfig& config, int mtu) {
    config_ = config;
    mtu_ = mtu;
    run_script(hooks::ScriptReason::pre_init);
    io::TunOptions t;
    t.name = o_.interface_name;
    auto tun = io::TunDevice::open(t);
    if (!tun) return make_error("tun device: " + tun.error().message);
    tun_.emplace(std::move(*tun));
    LOG_INFO << "tun device " << tun_->name() << " (offloads: " << (tun_->offloads().tso ? "TSO" : "none")
             << (tun_->offloads().uso ? "+USO" : "") << ")";
    if (scripts_) {
        run_script(hooks::ScriptReason::connect);
        return {};
    }
    if (Status s = configure_netlink(); !s) return make_error("host setup: " + s.error().message);
    return {};
}

// Without --script: addresses, MTU and split routes through netlink.
Status TunnelHost::configure_netlink() {
    const TunnelConfig& c = config_;
    if (Status s = tun_->set_mtu(static_cast<unsigned>(mtu_)); !s) return s;
    auto add = [&](const std::string& text) -> Status {
        auto a = io::InterfaceAddress::parse(text);
        if (!a) return make_error("address " + text + ": " + a.error().message);
        return tun_->add_address(*a);
    };
    if (!c.ip4_address.empty()) {
        if (Status s = add(c.ip4_address + "/32"); !s) return s;
    }
    if (!c.ip6_address.empty() && !o_.disable_ipv6) {
        if (Status s = add(c.ip6_address + "/" + std::to_string(c.ip6_prefix)); !s) return s;
    }
    if (Status s = tun_->set_up(true); !s) return s;
    for (const IpPrefix& r : c.split_include) {
        if (r.v6 && o_.disable_ipv6) continue;
        if (r.length == 0) {
            LOG_WARN << "default route " << r.to_string()
                     << " not installed by the built-in setup (use --script for full routing)";
            continue;
        }
        auto dst = io::InterfaceAddress::parse(r.to_string());
        if (!dst) return make_error("route " + r.to_string() + ": " + dst.error().message);
        if (Status s = tun_->add_route(*dst); !s) return make_error("route " + r.to_string() + ": " + s.error().message);
    }
    if (c.split_include.empty())
        LOG_WARN << "the gateway sends all traffic (no split routes); the built-in setup adds no default route: "
                    "use --script (vpnc-script) for that";
    if (!c.split_exclude.empty())
        LOG_INFO << c.split_exclude.size() << " excluded route(s) offered; the built-in setup leaves them to the "
                 << "main table (use --script)";
    if (!c.dns.empty()) {
        auto dns = hooks::HostDns::apply(hooks::built_in_dns_settings(c, tun_->name(), tun_->ifindex(), getpid()));
        if (!dns) LOG_WARN << "DNS not configured: " << dns.error().message;
        else dns_ = std::move(*dns);
    }
    return {};
}

void TunnelHost::tear_down() {
    if (tun_) run_script(hooks::ScriptReason::disconnect);
    scripts_.reset();
    dns_.reset();
    tun_.reset();  // removes the device (or our addresses/routes on a persistent one)
}

}  // namespace espvpn::session
