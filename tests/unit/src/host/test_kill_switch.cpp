#include <doctest/doctest.h>

#include <string>

#include "src/host/kill_switch.h"

using namespace espvpn;
using namespace espvpn::host;

namespace {

KillSwitchRules rules() {
    KillSwitchRules r;
    r.tun_name = "tun3";
    r.peers = {"192.0.2.10", "2001:db8::10", "not an address"};
    r.allowed = {IpPrefix::parse("10.1.0.0/16").value(), IpPrefix::parse("fd00:5::/64").value()};
    r.pid = 777;
    return r;
}

// The rule lines of one chain ("output" or "input"), in order.
std::string chain(const std::string& script, const std::string& name) {
    auto start = script.find("chain " + name + " {");
    REQUIRE(start != std::string::npos);
    return script.substr(start, script.find("  }\n", start) - start);
}

}  // namespace

TEST_CASE("kill switch: one atomic replacement of espvpn's own table, naming the pid") {
    const std::string s = kill_switch_script(rules());
    // create-if-missing, delete, define: one nft transaction, never a moment without rules
    CHECK(s.rfind("table inet espvpn_kill_switch\ndelete table inet espvpn_kill_switch\n"
                  "table inet espvpn_kill_switch {\n", 0) == 0);
    CHECK(s.find("comment \"espvpn pid 777 --kill-switch\"") != std::string::npos);
}

TEST_CASE("kill switch: output drops by default and lets through only the allowed") {
    const std::string out = chain(kill_switch_script(rules()), "output");
    CHECK(out.find("type filter hook output priority filter; policy drop;") != std::string::npos);
    CHECK(out.find("oifname \"lo\" accept") != std::string::npos);
    CHECK(out.find("oifname \"tun3\" accept") != std::string::npos);
    CHECK(out.find("ip daddr { 192.0.2.10 } accept") != std::string::npos);
    CHECK(out.find("ip6 daddr { 2001:db8::10 } accept") != std::string::npos);
    CHECK(out.find("ip daddr { 10.1.0.0/16 } accept") != std::string::npos);
    CHECK(out.find("ip6 daddr { fd00:5::/64 } accept") != std::string::npos);
    CHECK(out.find("udp sport 68 udp dport 67 accept") != std::string::npos);  // DHCPv4
    CHECK(out.find("nd-neighbor-solicit") != std::string::npos);
    CHECK(out.find("not an address") == std::string::npos);  // a bad peer is left out, not spliced in
    // the last rule counts what was blocked
    CHECK(out.find("counter drop comment \"blocked out\"") != std::string::npos);
    // nothing accepts by port or state on the way out: a connection opened before the
    // switch (or by another program) gets no pass
    CHECK(out.find("ct state") == std::string::npos);
}

TEST_CASE("kill switch: input takes replies, the gateway, the tunnel, and drops the rest") {
    const std::string in = chain(kill_switch_script(rules()), "input");
    CHECK(in.find("policy drop;") != std::string::npos);
    CHECK(in.find("iifname \"tun3\" accept") != std::string::npos);
    CHECK(in.find("ct state established,related accept") != std::string::npos);
    CHECK(in.find("ip saddr { 192.0.2.10 } accept") != std::string::npos);
    CHECK(in.find("counter drop comment \"blocked in\"") != std::string::npos);
}

TEST_CASE("kill switch: no peers or prefixes of a family, no rule for it") {
    KillSwitchRules r;
    r.tun_name = "tun0";
    r.peers = {"192.0.2.1"};
    const std::string s = kill_switch_script(r);
    CHECK(s.find("ip6 daddr {") == std::string::npos);
    CHECK(s.find("ip6 saddr {") == std::string::npos);
}

TEST_CASE("kill switch: a quote in an interface name cannot end the string") {
    KillSwitchRules r;
    r.tun_name = "tun\" accept\nx";
    const std::string s = kill_switch_script(r);
    CHECK(s.find("oifname \"tun acceptx\" accept") != std::string::npos);
}

TEST_CASE("kill switch: the portal's addresses pass on their TCP port only") {
    KillSwitchRules r = rules();
    r.tcp_services = {{"192.0.2.20", 443}, {"2001:db8::20", 8443}, {"portal.example", 443}, {"192.0.2.21", 0}};
    const std::string s = kill_switch_script(r);
    const std::string out = chain(s, "output");
    CHECK(out.find("ip daddr 192.0.2.20 tcp dport 443 accept") != std::string::npos);
    CHECK(out.find("ip6 daddr 2001:db8::20 tcp dport 8443 accept") != std::string::npos);
    // a name or a bad port is left out, not spliced in
    CHECK(out.find("portal.example") == std::string::npos);
    CHECK(out.find("192.0.2.21") == std::string::npos);
    // not every packet to the portal: no address-only rule for it, and it comes before the drop
    CHECK(out.find("{ 192.0.2.20 }") == std::string::npos);
    CHECK(out.find("tcp dport 443 accept") < out.find("counter drop"));
    // its replies come back by ct state, nothing else from it
    CHECK(chain(s, "input").find("192.0.2.20") == std::string::npos);
}

TEST_CASE("kill switch: a captive portal's exception: empty sets, TCP 80/443 and DNS only, with timeouts") {
    const std::string s = kill_switch_script(rules());
    for (const char* set : {"set captive_tcp {\n    type inet_service; flags timeout;",
                            "set captive_dns4 {\n    type ipv4_addr; flags timeout;",
                            "set captive_dns6 {\n    type ipv6_addr; flags timeout;"})
        CHECK_MESSAGE(s.find(set) != std::string::npos, set);
    CHECK(s.find("elements") == std::string::npos);  // closed until it is opened
    const std::string out = chain(s, "output");
    CHECK(out.find("tcp dport @captive_tcp accept") != std::string::npos);
    CHECK(out.find("ip daddr @captive_dns4 meta l4proto { tcp, udp } th dport 53 accept") != std::string::npos);
    CHECK(out.find("ip6 daddr @captive_dns6 meta l4proto { tcp, udp } th dport 53 accept") != std::string::npos);
    // the probe's marked sockets: to port 80 only
    CHECK(out.find("meta mark " + std::to_string(kProbeMark) + " tcp dport 80 accept") != std::string::npos);
    // ... all before the final drop
    CHECK(out.find("@captive_tcp") < out.find("counter drop"));
    CHECK(chain(s, "input").find("captive") == std::string::npos);  // replies come back by ct state

    const std::string open = captive_exception_script({"192.0.2.53", "2001:db8::53", "not an address", "10.0.0.1; flush ruleset"}, 300);
    CHECK(open == "add element inet espvpn_kill_switch captive_tcp { 80 timeout 300s, 443 timeout 300s }\n"
                  "add element inet espvpn_kill_switch captive_dns4 { 192.0.2.53 timeout 300s }\n"
                  "add element inet espvpn_kill_switch captive_dns6 { 2001:db8::53 timeout 300s }\n");
}
