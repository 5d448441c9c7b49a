#include "src/host/script_env.h"

#include <arpa/inet.h>

namespace espvpn::host {

std::string_view reason_name(ScriptReason reason) {
    switch (reason) {
        case ScriptReason::pre_init: return "pre-init";
        case ScriptReason::connect: return "connect";
        case ScriptReason::disconnect: return "disconnect";
        case ScriptReason::attempt_reconnect: return "attempt-reconnect";
        case ScriptReason::reconnect: return "reconnect";
    }
    return "?";
}

bool is_contract_variable(std::string_view name) {
    for (std::string_view prefix : {"INTERNAL_IP4_", "INTERNAL_IP6_", "CISCO_"})
        if (name.substr(0, prefix.size()) == prefix) return true;
    for (std::string_view exact : {"reason", "VPNGATEWAY", "TUNDEV", "VPNPID", "LOG_LEVEL",
                                   "IDLE_TIMEOUT"})
        if (name == exact) return true;
    return false;
}

namespace {

class EnvBuilder {
public:
    void set(std::string name, std::string value) { env_.emplace_back(std::move(name), std::move(value)); }
    void set_or_unset(std::string name, const std::string& value) {
        if (value.empty()) env_.emplace_back(std::move(name), std::nullopt);
        else env_.emplace_back(std::move(name), value);
    }
    void unset(std::string name) { env_.emplace_back(std::move(name), std::nullopt); }
    ScriptEnv take() { return std::move(env_); }

private:
    ScriptEnv env_;
};

std::string join(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

void add_routes(EnvBuilder& env, const std::vector<IpPrefix>& routes, bool v6,
                const std::string& count_name, const std::string& prefix) {
    int n = 0;
    for (const auto& r : routes) {
        if (r.v6 != v6) continue;
        std::string base = prefix + std::to_string(n) + "_";
        env.set(base + "ADDR", r.address());
        if (!v6) env.set(base + "MASK", r.netmask());
        env.set(base + "MASKLEN", std::to_string(r.length));
        ++n;
    }
    if (n) env.set(count_name, std::to_string(n));
    else env.unset(count_name);
}

}  // namespace

ScriptEnv build_script_env(const TunnelConfig& c, const ScriptContext& ctx) {
    EnvBuilder env;
    env.set("reason", std::string(reason_name(ctx.reason)));
    env.set_or_unset("VPNGATEWAY", c.gateway_address);
    env.set_or_unset("TUNDEV", ctx.tun_device);
    env.set("VPNPID", std::to_string(ctx.vpn_pid));
    env.set("LOG_LEVEL", std::to_string(ctx.log_level));
    env.set_or_unset("IDLE_TIMEOUT", c.idle_timeout_s > 0 ? std::to_string(c.idle_timeout_s) : "");

    env.set_or_unset("INTERNAL_IP4_ADDRESS", c.ip4_address);
    std::string mask, masklen, netaddr;
    if (!c.ip4_address.empty() && !c.ip4_netmask.empty()) {
        auto len = netmask_length(c.ip4_netmask);
        auto net = IpPrefix::parse(c.ip4_address + "/" + c.ip4_netmask);
        if (len && net) {  // like openconnect: only a valid contiguous mask is passed on
            mask = c.ip4_netmask;
            masklen = std::to_string(*len);
            netaddr = net->address();
        }
    }
    env.set_or_unset("INTERNAL_IP4_NETMASK", mask);
    env.set_or_unset("INTERNAL_IP4_NETMASKLEN", masklen);
    env.set_or_unset("INTERNAL_IP4_NETADDR", netaddr);
    env.set_or_unset("INTERNAL_IP4_MTU", c.mtu > 0 ? std::to_string(c.mtu) : "");
    env.set_or_unset("INTERNAL_IP4_DNS", join(c.dns, " "));
    env.set_or_unset("INTERNAL_IP4_NBNS", join(c.nbns, " "));

    env.set_or_unset("INTERNAL_IP6_ADDRESS", c.ip6_address);
    env.set_or_unset("INTERNAL_IP6_NETMASK",
                     c.ip6_address.empty() ? "" : c.ip6_address + "/" + std::to_string(c.ip6_prefix));

    env.set_or_unset("CISCO_DEF_DOMAIN", c.default_domain);
    env.set_or_unset("CISCO_BANNER", c.banner);
    env.set_or_unset("CISCO_PROXY_PAC", c.proxy_pac);
    env.set_or_unset("CISCO_SPLIT_DNS", join(c.split_dns, ","));

    add_routes(env, c.split_include, false, "CISCO_SPLIT_INC", "CISCO_SPLIT_INC_");
    add_routes(env, c.split_exclude, false, "CISCO_SPLIT_EXC", "CISCO_SPLIT_EXC_");
    add_routes(env, c.split_include, true, "CISCO_IPV6_SPLIT_INC", "CISCO_IPV6_SPLIT_INC_");
    add_routes(env, c.split_exclude, true, "CISCO_IPV6_SPLIT_EXC", "CISCO_IPV6_SPLIT_EXC_");

    std::string options;
    for (const auto& [name, value] : c.protocol_options) {
        if (!options.empty()) options += '\n';
        options += name + "=" + value;
    }
    env.set_or_unset("CISCO_CSTP_OPTIONS", options);
    return env.take();
}

}  // namespace espvpn::host
