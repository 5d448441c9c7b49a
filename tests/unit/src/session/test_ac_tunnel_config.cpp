// The CONNECT reply's configuration as the host side sees it (TunnelConfig).
#include <doctest/doctest.h>

#include "src/session/anyconnect/tunnel.h"

using namespace espvpn;

TEST_CASE("AnyConnect reply maps onto TunnelConfig") {
    anyconnect::AcCstpConfig r;
    r.ipv4_address = "192.168.99.121";
    r.ipv4_netmask = "255.255.255.0";
    r.ipv6_address = "fd00::5";
    r.ipv6_prefix = 64;
    r.mtu = 1434;
    r.dns = {"192.168.99.1"};
    r.default_domain = "example.test";
    r.split_dns = {"example.test"};
    r.split_include = {{"10.202.0.0/255.255.255.0", false}, {"fd00:1::/48", true}};
    r.split_exclude = {{"10.202.0.128/255.255.255.128", false}};
    r.banner = "hi";
    r.cstp_options = {{"X-CSTP-Version", "1"}};
    auto c = session::map_ac_tunnel_config(r, "10.201.0.1");
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    CHECK(c->gateway_address == "10.201.0.1");
    CHECK(c->ip4_address == "192.168.99.121");
    CHECK(c->ip6_prefix == 64);
    CHECK(c->mtu == 1434);
    REQUIRE(c->split_include.size() == 2);
    CHECK(c->split_include[0].to_string() == "10.202.0.0/24");
    CHECK(c->split_include[1].to_string() == "fd00:1::/48");
    REQUIRE(c->split_exclude.size() == 1);
    CHECK(c->split_exclude[0].to_string() == "10.202.0.128/25");
    CHECK(c->protocol_options.size() == 1);
    CHECK(c->banner == "hi");

    r.split_include = {{"10.0.0.0/255.0.255.0", false}};  // not contiguous
    auto bad = session::map_ac_tunnel_config(r, "10.201.0.1");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find("split-include 10.0.0.0/255.0.255.0") != std::string::npos);
}
