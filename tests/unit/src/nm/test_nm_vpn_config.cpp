#include <doctest/doctest.h>

#include <arpa/inet.h>

#include "src/host/script_env.h"
#include "src/nm/nm_vpn_config.h"

using namespace espvpn;
using namespace espvpn::nm;

namespace {

Ip4Address v4(const char* text) {
    Ip4Address a{};
    REQUIRE(inet_pton(AF_INET, text, a.data()) == 1);
    return a;
}
Ip6Address v6(const char* text) {
    Ip6Address a{};
    REQUIRE(inet_pton(AF_INET6, text, a.data()) == 1);
    return a;
}

// The environment of docs/protocols/vpnc-script-and-networkmanager.md §A.3 (openconnect 9.01 at
// "connect"), plus IPv6 and a second DNS server of each family.
ScriptEnvironment observed_connect_env() {
    return {
        {"reason", "connect"},
        {"VPNGATEWAY", "127.0.0.1"},
        {"TUNDEV", "octun0"},
        {"VPNPID", "9411"},
        {"INTERNAL_IP4_ADDRESS", "192.168.99.121"},
        {"INTERNAL_IP4_NETMASK", "255.255.255.0"},
        {"INTERNAL_IP4_NETMASKLEN", "24"},
        {"INTERNAL_IP4_NETADDR", "192.168.99.0"},
        {"INTERNAL_IP4_MTU", "1434"},
        {"INTERNAL_IP4_DNS", "192.168.99.1 fd00:99::1 192.168.99.2"},
        {"INTERNAL_IP6_ADDRESS", "fd00:99::121"},
        {"INTERNAL_IP6_NETMASK", "fd00:99::121/64"},
        {"CISCO_DEF_DOMAIN", "example.test"},
        {"CISCO_SPLIT_DNS", "example.test,corp.test"},
        {"CISCO_BANNER", "Hello from test ocserv"},
        {"CISCO_SPLIT_INC", "2"},
        {"CISCO_SPLIT_INC_0_ADDR", "172.30.0.0"},
        {"CISCO_SPLIT_INC_0_MASK", "255.255.0.0"},
        {"CISCO_SPLIT_INC_0_MASKLEN", "16"},
        {"CISCO_SPLIT_INC_1_ADDR", "10.99.0.0"},
        {"CISCO_SPLIT_INC_1_MASK", "255.255.0.0"},
        {"CISCO_SPLIT_INC_1_MASKLEN", "16"},
        {"CISCO_SPLIT_EXC", "1"},
        {"CISCO_SPLIT_EXC_0_ADDR", "10.99.5.0"},
        {"CISCO_SPLIT_EXC_0_MASK", "255.255.255.0"},
        {"CISCO_SPLIT_EXC_0_MASKLEN", "24"},
        {"CISCO_IPV6_SPLIT_INC", "1"},
        {"CISCO_IPV6_SPLIT_INC_0_ADDR", "fd00:202::"},
        {"CISCO_IPV6_SPLIT_INC_0_MASKLEN", "64"},
    };
}

NmVpnConfig convert(const ScriptEnvironment& env) {
    auto result = nm_config_from_script_env(env);
    if (auto* e = std::get_if<NmConfigError>(&result)) FAIL("unexpected error: " << e->message);
    return std::get<NmVpnConfig>(result);
}

NmConfigError convert_error(const ScriptEnvironment& env) {
    auto result = nm_config_from_script_env(env);
    REQUIRE(std::holds_alternative<NmConfigError>(result));
    return std::get<NmConfigError>(result);
}

}  // namespace

TEST_CASE("nm config: the observed openconnect connect environment") {
    const NmVpnConfig c = convert(observed_connect_env());
    CHECK(std::get<Ip4Address>(c.generic.gateway) == v4("127.0.0.1"));
    CHECK(c.generic.tundev == "octun0");
    CHECK(c.generic.mtu == 1434u);
    CHECK(c.generic.banner == "Hello from test ocserv");
    CHECK(c.generic.has_ip4);
    CHECK(c.generic.has_ip6);

    REQUIRE(c.ip4);
    CHECK(c.ip4->address == v4("192.168.99.121"));
    CHECK(c.ip4->prefix == 24);
    CHECK(c.ip4->dns == std::vector<Ip4Address>{v4("192.168.99.1"), v4("192.168.99.2")});
    CHECK(c.ip4->domains == std::vector<std::string>{"example.test", "corp.test"});  // split DNS wins
    CHECK(c.ip4->routes == std::vector<Ip4Route>{{v4("172.30.0.0"), 16}, {v4("10.99.0.0"), 16}});
    CHECK(c.ip4->never_default);

    REQUIRE(c.ip6);
    CHECK(c.ip6->address == v6("fd00:99::121"));
    CHECK(c.ip6->prefix == 64);
    CHECK(c.ip6->dns == std::vector<Ip6Address>{v6("fd00:99::1")});
    CHECK(c.ip6->domain == "example.test");
    CHECK(c.ip6->routes == std::vector<Ip6Route>{{v6("fd00:202::"), 64}});
    CHECK(c.ip6->never_default);
}

TEST_CASE("nm config: what espvpn's own script environment produces converts back") {
    // The producer (src/host/script_env) and this consumer must agree on the contract.
    TunnelConfig t;
    t.gateway_address = "10.201.0.1";
    t.ip4_address = "10.200.0.2";
    t.ip4_netmask = "255.255.255.255";
    t.ip6_address = "fd00:200::2";
    t.ip6_prefix = 128;
    t.mtu = 1400;
    t.dns = {"10.202.0.53", "fd00:202::53"};
    t.default_domain = "corp.test";
    auto inc4 = IpPrefix::parse("10.202.0.0/24");
    auto inc6 = IpPrefix::parse("fd00:202::/64");
    auto exc4 = IpPrefix::parse("10.202.0.128/25");
    REQUIRE(inc4);
    REQUIRE(inc6);
    REQUIRE(exc4);
    t.split_include = {*inc4, *inc6};
    t.split_exclude = {*exc4};
    host::ScriptContext ctx{host::ScriptReason::connect, "tun7", 1234, 1};
    ScriptEnvironment env;
    for (const auto& [name, value] : host::build_script_env(t, ctx))
        if (value) env[name] = *value;

    const NmVpnConfig c = convert(env);
    CHECK(std::get<Ip4Address>(c.generic.gateway) == v4("10.201.0.1"));
    CHECK(c.generic.tundev == "tun7");
    CHECK(c.generic.mtu == 1400u);
    REQUIRE(c.ip4);
    CHECK(c.ip4->address == v4("10.200.0.2"));
    CHECK(c.ip4->prefix == 32);
    CHECK(c.ip4->dns == std::vector<Ip4Address>{v4("10.202.0.53")});
    CHECK(c.ip4->domains == std::vector<std::string>{"corp.test"});
    CHECK(c.ip4->routes == std::vector<Ip4Route>{{v4("10.202.0.0"), 24}});  // the exclude is not an NM route
    CHECK(c.ip4->never_default);
    REQUIRE(c.ip6);
    CHECK(c.ip6->address == v6("fd00:200::2"));
    CHECK(c.ip6->prefix == 128);
    CHECK(c.ip6->dns == std::vector<Ip6Address>{v6("fd00:202::53")});
    CHECK(c.ip6->routes == std::vector<Ip6Route>{{v6("fd00:202::"), 64}});
}

TEST_CASE("nm config: full tunnel, IPv4 only, defaults") {
    ScriptEnvironment env = {{"VPNGATEWAY", "fd00:201::1"}, {"TUNDEV", "tun0"}, {"INTERNAL_IP4_ADDRESS", "10.0.0.5"},
                             {"CISCO_DEF_DOMAIN", "a.test b.test"}};
    NmVpnConfig c = convert(env);
    CHECK(std::get<Ip6Address>(c.generic.gateway) == v6("fd00:201::1"));
    CHECK_FALSE(c.generic.mtu);
    CHECK(c.generic.has_ip4);
    CHECK_FALSE(c.generic.has_ip6);
    CHECK_FALSE(c.ip6);
    REQUIRE(c.ip4);
    CHECK(c.ip4->prefix == 32);  // no netmask: a host address on a point-to-point tun
    CHECK(c.ip4->routes.empty());
    CHECK_FALSE(c.ip4->never_default);  // no split routes: NM may make it the default route
    CHECK(c.ip4->domains == std::vector<std::string>{"a.test", "b.test"});

    SUBCASE("a 0.0.0.0/0 include is the default route, not a split route") {
        env["CISCO_SPLIT_INC"] = "2";
        env["CISCO_SPLIT_INC_0_ADDR"] = "0.0.0.0";
        env["CISCO_SPLIT_INC_0_MASKLEN"] = "0";
        env["CISCO_SPLIT_INC_1_ADDR"] = "10.1.0.0";
        env["CISCO_SPLIT_INC_1_MASK"] = "255.255.0.0";  // only the mask: length derived
        c = convert(env);
        CHECK(c.ip4->routes == std::vector<Ip4Route>{{v4("10.1.0.0"), 16}});
        CHECK_FALSE(c.ip4->never_default);
    }
    SUBCASE("an implausible MTU is left out") {
        env["INTERNAL_IP4_MTU"] = "99999";
        CHECK_FALSE(convert(env).generic.mtu);
    }
    SUBCASE("unset and empty are the same") {
        env["INTERNAL_IP6_ADDRESS"] = "";
        env["CISCO_SPLIT_INC"] = "";
        c = convert(env);
        CHECK_FALSE(c.ip6);
        CHECK(c.ip4->routes.empty());
    }
}

TEST_CASE("nm config: IPv6 only") {
    NmVpnConfig c = convert({{"VPNGATEWAY", "10.1.1.1"},
                             {"TUNDEV", "tun0"},
                             {"INTERNAL_IP6_ADDRESS", "fd00::5"},
                             {"INTERNAL_IP6_NETMASK", "fd00::5/64"},
                             {"INTERNAL_IP4_DNS", "fd00::53"}});
    CHECK_FALSE(c.generic.has_ip4);
    CHECK(c.generic.has_ip6);
    CHECK_FALSE(c.ip4);
    REQUIRE(c.ip6);
    CHECK(c.ip6->prefix == 64);
    CHECK(c.ip6->dns == std::vector<Ip6Address>{v6("fd00::53")});
}

TEST_CASE("nm config: mandatory values missing or malformed name the variable") {
    const ScriptEnvironment good = {{"VPNGATEWAY", "10.1.1.1"}, {"TUNDEV", "tun0"}, {"INTERNAL_IP4_ADDRESS", "10.0.0.5"}};
    auto with = [&](const char* name, const char* value) {
        ScriptEnvironment env = good;
        env[name] = value;
        return convert_error(env);
    };
    auto without = [&](const char* name) {
        ScriptEnvironment env = good;
        env.erase(name);
        return convert_error(env);
    };
    CHECK(without("VPNGATEWAY").reason == "VPN Gateway");
    CHECK(with("VPNGATEWAY", "vpn.example.com").message.find("VPNGATEWAY='vpn.example.com'") != std::string::npos);
    CHECK(without("TUNDEV").reason == "Tunnel Device");
    CHECK(without("INTERNAL_IP4_ADDRESS").reason == "IP4 Address");
    CHECK(with("INTERNAL_IP4_ADDRESS", "10.0.0.300").reason == "IP4 Address");
    CHECK(with("INTERNAL_IP6_ADDRESS", "fd00::zz").reason == "IP6 Address");
    CHECK(with("INTERNAL_IP4_NETMASK", "255.0.255.0").message.find("INTERNAL_IP4_NETMASK") != std::string::npos);
    CHECK(with("INTERNAL_IP4_NETMASKLEN", "33").reason == "IP4 Prefix");
    CHECK(with("INTERNAL_IP4_DNS", "10.0.0.1 dns.example").message.find("'dns.example'") != std::string::npos);
    CHECK(with("INTERNAL_IP4_NBNS", "x").reason == "NBNS");
    CHECK(with("CISCO_SPLIT_INC", "two").message.find("CISCO_SPLIT_INC='two'") != std::string::npos);
    CHECK(with("CISCO_SPLIT_INC", "1").message.find("CISCO_SPLIT_INC_0_ADDR is missing") != std::string::npos);
    {
        ScriptEnvironment env = good;
        env["INTERNAL_IP6_ADDRESS"] = "fd00::5";
        env["INTERNAL_IP6_NETMASK"] = "fd00::5";
        CHECK(convert_error(env).reason == "IP6 Prefix");
    }
    {
        ScriptEnvironment env = good;
        env["CISCO_SPLIT_INC"] = "1";
        env["CISCO_SPLIT_INC_0_ADDR"] = "10.0.0.0";
        env["CISCO_SPLIT_INC_0_MASKLEN"] = "40";
        CHECK(convert_error(env).message.find("CISCO_SPLIT_INC_0_MASKLEN='40'") != std::string::npos);
    }
}

TEST_CASE("nm config: text that is not UTF-8 is read as Latin-1") {
    CHECK(utf8_from_utf8_or_latin1("plain") == "plain");
    CHECK(utf8_from_utf8_or_latin1("caf\xc3\xa9") == "caf\xc3\xa9");         // valid UTF-8 kept
    CHECK(utf8_from_utf8_or_latin1("caf\xe9") == "caf\xc3\xa9");             // Latin-1 e-acute
    CHECK(utf8_from_utf8_or_latin1("\xc0\xaf") == "\xc3\x80\xc2\xaf");       // overlong form rejected
    CHECK(utf8_from_utf8_or_latin1("\xed\xa0\x80") == "\xc3\xad\xc2\xa0\xc2\x80");  // surrogate rejected
    CHECK(utf8_from_utf8_or_latin1("\xe2\x82") == "\xc3\xa2\xc2\x82");       // truncated sequence
    ScriptEnvironment env = {{"VPNGATEWAY", "10.1.1.1"}, {"TUNDEV", "tun0"}, {"INTERNAL_IP4_ADDRESS", "10.0.0.5"},
                             {"CISCO_BANNER", "Gr\xfc\xdf"}};
    CHECK(convert(env).generic.banner == "Gr\xc3\xbc\xc3\x9f");
}
