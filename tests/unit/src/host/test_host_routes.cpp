#include <doctest/doctest.h>

#include <map>

#include "src/host/routes.h"

using namespace espvpn;
using namespace espvpn::host;

namespace {

IpPrefix P(const char* text) { return *IpPrefix::parse(text); }

std::vector<std::string> texts(const std::vector<IpPrefix>& v) {
    std::vector<std::string> out;
    for (const IpPrefix& p : v) out.push_back(p.to_string());
    return out;
}

// A host whose routes are given by prefix text; lookups are recorded.
struct FakeHost {
    std::map<std::string, RoutePath> paths;  // by the looked-up prefix
    std::vector<std::string> asked;
    PathLookup lookup() {
        return [this](const IpPrefix& p) -> std::optional<RoutePath> {
            asked.push_back(p.to_string());
            auto it = paths.find(p.to_string());
            if (it == paths.end()) return std::nullopt;
            return it->second;
        };
    }
};

const RoutePath kViaRouter{"10.201.0.1", 2, "eth0"};
const RoutePath kOnLink{"", 2, "eth0"};
const RoutePath kViaRouter6{"fe80::1", 2, "eth0"};

TunnelConfig dual_stack(const char* gateway = "192.0.2.10") {
    TunnelConfig c;
    c.gateway_address = gateway;
    c.ip4_address = "10.99.0.5";
    c.ip6_address = "fd00:99::5";
    c.ip6_prefix = 64;
    return c;
}

}  // namespace

TEST_CASE("split tunnel: the gateway's routes only, no halves, no lookups for an uncovered gateway") {
    TunnelConfig c = dual_stack();
    c.split_include = {P("10.200.0.0/16"), P("fd00:200::/64")};
    FakeHost host;
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    CHECK(texts(plan.tunnel) == std::vector<std::string>{"10.200.0.0/16", "fd00:200::/64"});
    CHECK(plan.bypass.empty());
    CHECK(host.asked.empty());  // nothing of ours covers the gateway: the host is not even asked
}

TEST_CASE("full tunnel (no split routes): both halves per family and the gateway's host route via its path") {
    TunnelConfig c = dual_stack();
    FakeHost host;
    host.paths["192.0.2.10/32"] = kViaRouter;
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    CHECK(texts(plan.tunnel) == std::vector<std::string>{"0.0.0.0/1", "128.0.0.0/1", "::/1", "8000::/1"});
    REQUIRE(plan.bypass.size() == 1);
    CHECK(plan.bypass[0] == BypassRoute{P("192.0.2.10/32"), kViaRouter, "gateway"});
    CHECK(plan.bypass[0].path.to_string() == "via 10.201.0.1 dev eth0");
}

TEST_CASE("full tunnel through a proxy: the proxy and the server ESP/DTLS go to directly both keep their path") {
    TunnelConfig c = dual_stack("192.0.2.10");  // the proxy (VPNGATEWAY)
    c.direct_udp_address = "198.51.100.20";     // the server itself
    FakeHost host;
    host.paths["192.0.2.10/32"] = kViaRouter;
    host.paths["198.51.100.20/32"] = kViaRouter;
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    REQUIRE(plan.bypass.size() == 2);
    CHECK(plan.bypass[0].destination == P("192.0.2.10/32"));
    CHECK(plan.bypass[1].destination == P("198.51.100.20/32"));
    c.direct_udp_address = c.gateway_address;  // no proxy: one route
    CHECK(plan_host_routes(c, false, host.lookup()).bypass.size() == 1);
}

TEST_CASE("full tunnel: an on-link gateway keeps its device, an IPv6 gateway gets a /128") {
    FakeHost host;
    TunnelConfig c = dual_stack("10.201.0.1");
    host.paths["10.201.0.1/32"] = kOnLink;
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    REQUIRE(plan.bypass.size() == 1);
    CHECK(plan.bypass[0].path.via.empty());
    CHECK(plan.bypass[0].path.to_string() == "dev eth0");

    TunnelConfig c6 = dual_stack("2001:db8::1");
    host.paths["2001:db8::1/128"] = kViaRouter6;
    plan = plan_host_routes(c6, false, host.lookup());
    REQUIRE(plan.bypass.size() == 1);
    CHECK(plan.bypass[0] == BypassRoute{P("2001:db8::1/128"), kViaRouter6, "gateway"});
}

TEST_CASE("full tunnel: no path to the gateway now is a note, not a route") {
    FakeHost host;  // knows no routes (a local or unreachable gateway)
    HostRoutePlan plan = plan_host_routes(dual_stack(), false, host.lookup());
    CHECK(plan.bypass.empty());
    CHECK(plan.tunnel.size() == 4);
    REQUIRE(plan.notes.size() == 1);
    CHECK(plan.notes[0].find("no route to the gateway 192.0.2.10") != std::string::npos);
}

TEST_CASE("full tunnel: only the families the tunnel has an address of") {
    FakeHost host;
    host.paths["192.0.2.10/32"] = kViaRouter;
    TunnelConfig v4only = dual_stack();
    v4only.ip6_address.clear();
    CHECK(texts(plan_host_routes(v4only, false, host.lookup()).tunnel) ==
          std::vector<std::string>{"0.0.0.0/1", "128.0.0.0/1"});

    TunnelConfig v6only = dual_stack();
    v6only.ip4_address.clear();
    HostRoutePlan plan = plan_host_routes(v6only, false, host.lookup());
    CHECK(texts(plan.tunnel) == std::vector<std::string>{"::/1", "8000::/1"});
    CHECK(plan.bypass.empty());  // an IPv4 gateway is not inside IPv6 routes
    CHECK(plan.notes.empty());

    // --disable-ipv6: no IPv6 routes at all, whatever the gateway sends.
    TunnelConfig both = dual_stack();
    both.split_include = {P("::/0"), P("fd00:200::/64")};
    CHECK(plan_host_routes(both, true, host.lookup()).tunnel.empty());
    CHECK(texts(plan_host_routes(dual_stack(), true, host.lookup()).tunnel) ==
          std::vector<std::string>{"0.0.0.0/1", "128.0.0.0/1"});
}

TEST_CASE("0.0.0.0/0 or ::/0 among split routes: that family goes full, the other keeps its split routes") {
    FakeHost host;
    host.paths["192.0.2.10/32"] = kViaRouter;
    TunnelConfig c = dual_stack();
    c.split_include = {P("0.0.0.0/0"), P("10.200.0.0/16"), P("fd00:200::/64")};
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    CHECK(texts(plan.tunnel) == std::vector<std::string>{"10.200.0.0/16", "fd00:200::/64", "0.0.0.0/1", "128.0.0.0/1"});
    CHECK(plan.bypass.size() == 1);

    c.split_include = {P("::/0"), P("10.200.0.0/16")};
    plan = plan_host_routes(c, false, host.lookup());
    CHECK(texts(plan.tunnel) == std::vector<std::string>{"10.200.0.0/16", "::/1", "8000::/1"});
    CHECK(plan.bypass.empty());

    // A default for a family the tunnel has no address of: said, not routed.
    c.ip6_address.clear();
    plan = plan_host_routes(c, false, host.lookup());
    CHECK(texts(plan.tunnel) == std::vector<std::string>{"10.200.0.0/16"});
    REQUIRE(plan.notes.size() == 1);
    CHECK(plan.notes[0].find("::/0 offered") != std::string::npos);

    // The halves given explicitly are not doubled.
    c = dual_stack();
    c.split_include = {P("0.0.0.0/1"), P("0.0.0.0/0")};
    CHECK(texts(plan_host_routes(c, false, host.lookup()).tunnel) == std::vector<std::string>{"0.0.0.0/1", "128.0.0.0/1"});
}

TEST_CASE("a split route covering the gateway gets the gateway its host route too") {
    FakeHost host;
    host.paths["10.201.0.1/32"] = kOnLink;
    TunnelConfig c = dual_stack("10.201.0.1");
    c.split_include = {P("10.201.0.0/16")};
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    REQUIRE(plan.bypass.size() == 1);
    CHECK(plan.bypass[0].reason == "gateway");
}

TEST_CASE("excluded prefixes inside the tunnel's routes keep their path; others are notes") {
    FakeHost host;
    host.paths["192.0.2.10/32"] = kViaRouter;
    host.paths["10.202.0.128/25"] = kViaRouter;
    host.paths["2001:db8:5::/48"] = kViaRouter6;
    TunnelConfig c = dual_stack();
    c.split_exclude = {P("10.202.0.128/25"), P("2001:db8:5::/48"), P("172.16.0.0/12"), P("0.0.0.0/0")};
    HostRoutePlan plan = plan_host_routes(c, false, host.lookup());
    REQUIRE(plan.bypass.size() == 3);
    CHECK(plan.bypass[0].reason == "gateway");  // the gateway first
    CHECK(plan.bypass[1] == BypassRoute{P("10.202.0.128/25"), kViaRouter, "excluded"});
    CHECK(plan.bypass[2] == BypassRoute{P("2001:db8:5::/48"), kViaRouter6, "excluded"});
    // 172.16/12 has no path outside (no default route): skipped; /0 is refused.
    REQUIRE(plan.notes.size() == 2);
    CHECK(plan.notes[1].find("0.0.0.0/0 ignored") != std::string::npos);
    CHECK(plan.notes[0].find("172.16.0.0/12 skipped") != std::string::npos);

    // Split tunnel: an exclude outside every tunnel route is not added (nor looked up).
    c.split_include = {P("10.202.0.0/24")};
    host.asked.clear();
    plan = plan_host_routes(c, false, host.lookup());
    REQUIRE(plan.bypass.size() == 1);
    CHECK(plan.bypass[0].destination == P("10.202.0.128/25"));
    CHECK(host.asked == std::vector<std::string>{"10.202.0.128/25"});

    // --disable-ipv6: IPv6 excludes are ignored with the rest of IPv6.
    c.split_include.clear();
    plan = plan_host_routes(c, true, host.lookup());
    for (const BypassRoute& b : plan.bypass) CHECK_FALSE(b.destination.v6);
}

TEST_CASE("prefix_covers: same family, shorter or equal prefix, matching bits") {
    CHECK(prefix_covers(P("0.0.0.0/1"), P("10.202.0.130/32")));
    CHECK_FALSE(prefix_covers(P("128.0.0.0/1"), P("10.202.0.130/32")));
    CHECK(prefix_covers(P("10.202.0.128/25"), P("10.202.0.130")));
    CHECK_FALSE(prefix_covers(P("10.202.0.128/25"), P("10.202.0.0/24")));
    CHECK_FALSE(prefix_covers(P("::/1"), P("10.0.0.1")));
    CHECK(prefix_covers(P("8000::/1"), P("fe80::1")));
}

TEST_CASE("domain routes: include via the tun, exclude by the gateway's path, the gateway left alone") {
    using Kind = DomainRoutePlan::Kind;
    TunnelConfig c = dual_stack();
    c.direct_udp_address = "192.0.2.11";
    const std::optional<RoutePath> gw4 = kViaRouter;

    CHECK(plan_domain_route(c, false, P("10.203.0.5"), true, false, gw4).kind == Kind::tun);
    CHECK(plan_domain_route(c, false, P("fd00:203::5"), true, false, std::nullopt).kind == Kind::tun);
    // Exclude: into the tun now -> the gateway's path; elsewhere now -> nothing to do.
    auto e = plan_domain_route(c, false, P("10.202.0.77"), false, true, gw4);
    CHECK(e.kind == Kind::outside);
    CHECK(e.path == kViaRouter);
    e = plan_domain_route(c, false, P("10.202.0.77"), false, false, gw4);
    CHECK(e.kind == Kind::none);
    CHECK(e.note == "already outside the tunnel: no route needed");
    // An IPv6 exclude with the gateway reached over IPv4 only: no path around the tunnel.
    e = plan_domain_route(c, false, P("fd00:202::77"), false, true, std::nullopt);
    CHECK(e.kind == Kind::none);
    CHECK(e.note.find("no path outside the tunnel for IPv6") != std::string::npos);
    // The gateway's addresses never get a domain route (the outer packets would loop).
    for (const char* gw : {"192.0.2.10", "192.0.2.11"}) {
        CHECK(plan_domain_route(c, false, P(gw), true, false, gw4).kind == Kind::none);
        CHECK(plan_domain_route(c, false, P(gw), false, true, gw4).kind == Kind::none);
    }
    // The gateway's own split-exclude prefixes win over an include name.
    c.split_exclude = {P("10.203.0.0/28")};
    e = plan_domain_route(c, false, P("10.203.0.5"), true, false, gw4);
    CHECK(e.kind == Kind::none);
    CHECK(e.note == "inside the excluded route 10.203.0.0/28: left outside");
    CHECK(plan_domain_route(c, false, P("10.203.0.17"), true, false, gw4).kind == Kind::tun);
    // No tunnel address of the family, or IPv6 disabled.
    CHECK(plan_domain_route(c, true, P("fd00:203::5"), true, false, std::nullopt).kind == Kind::none);
    c.ip6_address.clear();
    e = plan_domain_route(c, false, P("fd00:203::5"), true, false, std::nullopt);
    CHECK(e.kind == Kind::none);
    CHECK(e.note == "the tunnel has no IPv6 address");
}
