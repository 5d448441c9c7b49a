#include <doctest/doctest.h>

#include <map>

#include "src/host/script_env.h"

using namespace espvpn;
using namespace espvpn::host;

namespace {
std::map<std::string, std::optional<std::string>> as_map(const ScriptEnv& env) {
    std::map<std::string, std::optional<std::string>> m;
    for (const auto& [k, v] : env) {
        CHECK_MESSAGE(m.count(k) == 0, "variable set twice: " << k);
        m[k] = v;
    }
    return m;
}

TunnelConfig sample() {
    TunnelConfig c;
    c.gateway_address = "10.201.0.1";
    c.ip4_address = "192.168.99.121";
    c.ip4_netmask = "255.255.255.0";
    c.ip6_address = "fd00:99::121";
    c.ip6_prefix = 64;
    c.mtu = 1400;
    c.dns = {"192.168.99.1", "fd00:99::1"};
    c.default_domain = "example.test";
    c.split_dns = {"example.test", "corp.test"};
    c.banner = "Hello";
    c.split_include = {*IpPrefix::parse("10.99.0.0/16"), *IpPrefix::parse("172.30.0.0/16"),
                       *IpPrefix::parse("fd00:aa::/48")};
    c.split_exclude = {*IpPrefix::parse("10.99.5.0/24"), *IpPrefix::parse("fd00:aa:1::/64")};
    c.protocol_options = {{"X-CSTP-Version", "1"}, {"X-CSTP-MTU", "1400"}};
    return c;
}
}  // namespace

TEST_CASE("connect environment follows openconnect's vpnc-script contract") {
    auto env = as_map(build_script_env(sample(), {ScriptReason::connect, "tun7", 4242, 2}));
    auto is = [&](const char* k, const char* v) {
        CAPTURE(k);
        REQUIRE(env.count(k));
        REQUIRE(env[k].has_value());
        CHECK(*env[k] == v);
    };
    is("reason", "connect");
    is("VPNGATEWAY", "10.201.0.1");
    is("TUNDEV", "tun7");
    is("VPNPID", "4242");
    is("LOG_LEVEL", "2");
    is("INTERNAL_IP4_ADDRESS", "192.168.99.121");
    is("INTERNAL_IP4_NETMASK", "255.255.255.0");
    is("INTERNAL_IP4_NETMASKLEN", "24");
    is("INTERNAL_IP4_NETADDR", "192.168.99.0");
    is("INTERNAL_IP4_MTU", "1400");
    is("INTERNAL_IP4_DNS", "192.168.99.1 fd00:99::1");
    is("INTERNAL_IP6_ADDRESS", "fd00:99::121");
    is("INTERNAL_IP6_NETMASK", "fd00:99::121/64");
    is("CISCO_DEF_DOMAIN", "example.test");
    is("CISCO_SPLIT_DNS", "example.test,corp.test");
    is("CISCO_BANNER", "Hello");
    is("CISCO_SPLIT_INC", "2");
    is("CISCO_SPLIT_INC_0_ADDR", "10.99.0.0");
    is("CISCO_SPLIT_INC_0_MASK", "255.255.0.0");
    is("CISCO_SPLIT_INC_0_MASKLEN", "16");
    is("CISCO_SPLIT_INC_1_ADDR", "172.30.0.0");
    is("CISCO_SPLIT_EXC", "1");
    is("CISCO_SPLIT_EXC_0_ADDR", "10.99.5.0");
    is("CISCO_SPLIT_EXC_0_MASKLEN", "24");
    is("CISCO_IPV6_SPLIT_INC", "1");
    is("CISCO_IPV6_SPLIT_INC_0_ADDR", "fd00:aa::");
    is("CISCO_IPV6_SPLIT_INC_0_MASKLEN", "48");
    CHECK(env.count("CISCO_IPV6_SPLIT_INC_0_MASK") == 0);  // IPv6 routes have no dotted mask
    is("CISCO_IPV6_SPLIT_EXC", "1");
    is("CISCO_IPV6_SPLIT_EXC_0_ADDR", "fd00:aa:1::");
    is("CISCO_CSTP_OPTIONS", "X-CSTP-Version=1\nX-CSTP-MTU=1400");
    // Absent values are explicitly unset, so nothing stale leaks in from our parent.
    REQUIRE(env.count("INTERNAL_IP4_NBNS"));
    CHECK_FALSE(env["INTERNAL_IP4_NBNS"].has_value());
    CHECK_FALSE(env["IDLE_TIMEOUT"].has_value());
    CHECK_FALSE(env["CISCO_PROXY_PAC"].has_value());
}

TEST_CASE("pre-init without an interface name unsets TUNDEV; no routes unsets the counts") {
    TunnelConfig c;
    c.ip4_address = "10.0.0.2";
    c.ip4_netmask = "255.0.255.0";  // not contiguous: not passed on, like openconnect
    auto env = as_map(build_script_env(c, {ScriptReason::pre_init, "", 1, 1}));
    CHECK(*env["reason"] == "pre-init");
    CHECK_FALSE(env["TUNDEV"].has_value());
    CHECK_FALSE(env["INTERNAL_IP4_NETMASK"].has_value());
    CHECK_FALSE(env["CISCO_SPLIT_INC"].has_value());
    CHECK_FALSE(env["CISCO_IPV6_SPLIT_EXC"].has_value());
    CHECK_FALSE(env["INTERNAL_IP6_ADDRESS"].has_value());
    CHECK_FALSE(env["INTERNAL_IP4_MTU"].has_value());
}

TEST_CASE("every reason has openconnect's name") {
    CHECK(reason_name(ScriptReason::pre_init) == "pre-init");
    CHECK(reason_name(ScriptReason::connect) == "connect");
    CHECK(reason_name(ScriptReason::disconnect) == "disconnect");
    CHECK(reason_name(ScriptReason::attempt_reconnect) == "attempt-reconnect");
    CHECK(reason_name(ScriptReason::reconnect) == "reconnect");
    CHECK(is_contract_variable("CISCO_SPLIT_INC_9_ADDR"));
    CHECK(is_contract_variable("VPNPID"));
    CHECK_FALSE(is_contract_variable("PATH"));
}
