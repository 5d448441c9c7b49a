#include "src/host/routes.h"

#include <algorithm>

namespace espvpn::host {

std::string RoutePath::to_string() const {
    std::string dev_text = dev.empty() ? "if#" + std::to_string(ifindex) : dev;
    return via.empty() ? "dev " + dev_text : "via " + via + " dev " + dev_text;
}

bool prefix_covers(const IpPrefix& prefix, const IpPrefix& address) {
    if (prefix.v6 != address.v6 || prefix.length > address.length) return false;
    for (int bit = 0; bit < prefix.length; ++bit) {
        const std::uint8_t mask = static_cast<std::uint8_t>(0x80 >> (bit % 8));
        if ((prefix.bytes[bit / 8] & mask) != (address.bytes[bit / 8] & mask)) return false;
    }
    return true;
}

namespace {
IpPrefix must_parse(const char* text) { return *IpPrefix::parse(text); }
}  // namespace

HostRoutePlan plan_host_routes(const TunnelConfig& c, bool disable_ipv6, const PathLookup& path_now) {
    HostRoutePlan plan;
    auto add_tunnel = [&](const IpPrefix& p) {
        if (std::find(plan.tunnel.begin(), plan.tunnel.end(), p) == plan.tunnel.end()) plan.tunnel.push_back(p);
    };
    // Full tunnel per family: everything when no split route is given, or that
    // family's default among them (a v4-only split list leaves IPv6 alone).
    bool full4 = c.split_include.empty(), full6 = c.split_include.empty();
    for (const IpPrefix& r : c.split_include) {
        if (r.v6 && disable_ipv6) continue;
        if (r.length == 0) {
            (r.v6 ? full6 : full4) = true;
            continue;
        }
        add_tunnel(r);
    }
    auto halves = [&](bool v6, bool full, bool has_address, const char* low, const char* high) {
        if (!full) return;
        if (!has_address) {
            if (!c.split_include.empty())
                plan.notes.push_back(std::string(v6 ? "::/0" : "0.0.0.0/0") +
                                     " offered but the tunnel has no address of that family: not routed");
            return;
        }
        add_tunnel(must_parse(low));
        add_tunnel(must_parse(high));
    };
    halves(false, full4, !c.ip4_address.empty(), "0.0.0.0/1", "128.0.0.0/1");
    halves(true, full6 && !disable_ipv6, !c.ip6_address.empty() && !disable_ipv6, "::/1", "8000::/1");

    auto in_tunnel = [&](const IpPrefix& p) {
        return std::any_of(plan.tunnel.begin(), plan.tunnel.end(),
                           [&](const IpPrefix& t) { return prefix_covers(t, p); });
    };
    // The outer packets to the gateway must keep their path, or they would loop into the tun.
    for (const std::string* peer : {&c.gateway_address, &c.direct_udp_address}) {
        if (peer->empty() || (peer != &c.gateway_address && *peer == c.gateway_address)) continue;
        if (auto gw = IpPrefix::parse(*peer); gw && in_tunnel(*gw)) {
            if (auto path = path_now(*gw)) plan.bypass.push_back({*gw, *path, "gateway"});
            else plan.notes.push_back("no route to the gateway " + *peer + " now: no host route for it");
        }
    }
    for (const IpPrefix& e : c.split_exclude) {
        if (e.v6 && disable_ipv6) continue;
        const std::string name = "excluded route " + e.to_string();
        if (e.length == 0) plan.notes.push_back(name + " ignored (it would exclude everything)");
        else if (!in_tunnel(e)) plan.notes.push_back(name + " not inside the tunnel's routes: nothing to add");
        else if (auto path = path_now(e)) plan.bypass.push_back({e, *path, "excluded"});
        else plan.notes.push_back(name + " skipped: the host has no route to it outside the tunnel");
    }
    return plan;
}

DomainRoutePlan plan_domain_route(const TunnelConfig& c, bool disable_ipv6, const IpPrefix& address, bool include,
                                  bool into_tun_now, const std::optional<RoutePath>& gateway_path) {
    using Kind = DomainRoutePlan::Kind;
    auto none = [](std::string note) { return DomainRoutePlan{Kind::none, {}, std::move(note)}; };
    for (const std::string* peer : {&c.gateway_address, &c.direct_udp_address}) {
        auto p = IpPrefix::parse(*peer);
        if (!peer->empty() && p && *p == address)
            return none("the gateway's own address: left as it is");
    }
    if (address.v6 && disable_ipv6) return none("IPv6 is disabled (--disable-ipv6)");
    if (include) {
        for (const IpPrefix& e : c.split_exclude)
            if (prefix_covers(e, address)) return none("inside the excluded route " + e.to_string() + ": left outside");
        if ((address.v6 ? c.ip6_address : c.ip4_address).empty())
            return none(std::string("the tunnel has no ") + (address.v6 ? "IPv6" : "IPv4") + " address");
        return DomainRoutePlan{Kind::tun, {}, {}};
    }
    if (!into_tun_now) return none("already outside the tunnel: no route needed");
    if (!gateway_path) return none(std::string("no path outside the tunnel for ") + (address.v6 ? "IPv6" : "IPv4") +
                                   " (the gateway is not reached over it)");
    return DomainRoutePlan{Kind::outside, *gateway_path, {}};
}

}  // namespace espvpn::host
