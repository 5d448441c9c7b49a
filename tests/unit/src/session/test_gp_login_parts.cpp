// The pure parts of the GlobalProtect session layer: where a login starts,
// log redaction, the getconfig → TunnelConfig mapping, the HIP program runner
// and the --authenticate quoting. The flow itself is tested end to end against
// the fake gateway (tests/integration/gp_login/).
#include <doctest/doctest.h>

#include "src/cli/tunnel_command.h"
#include "src/session/gp/login.h"
#include "src/session/gp/request_sender.h"
#include "src/session/gp/tunnel_setup.h"
#include "src/session/csd_program.h"

using namespace espvpn;
using namespace espvpn::session;

TEST_CASE("login target: URL path and --usergroup, openconnect's spellings") {
    auto t = parse_gp_login_target("vpn.example.com", "");
    REQUIRE(t);
    CHECK(t->entry == GpEntryPoint::automatic);
    CHECK(t->server.host == "vpn.example.com");
    CHECK(t->server.target == "/");

    t = parse_gp_login_target("https://vpn.example.com:8443/gateway", "");
    REQUIRE(t);
    CHECK(t->entry == GpEntryPoint::gateway);
    CHECK(t->server.port == 8443);
    CHECK(t->saml_field.empty());

    t = parse_gp_login_target("https://vpn.example.com/", "portal:prelogin-cookie");
    REQUIRE(t);
    CHECK(t->entry == GpEntryPoint::portal);
    CHECK(t->saml_field == "prelogin-cookie");

    t = parse_gp_login_target("https://vpn.example.com/gateway:portal-userauthcookie", "");
    REQUIRE(t);
    CHECK(t->entry == GpEntryPoint::gateway);
    CHECK(t->saml_field == "portal-userauthcookie");

    t = parse_gp_login_target("https://vpn.example.com/gateway", "gateway");
    CHECK(t);  // the same thing twice is fine

    auto bad = parse_gp_login_target("https://vpn.example.com/", "gatway");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("'gatway'") != std::string::npos);
    bad = parse_gp_login_target("https://vpn.example.com/", "gateway:passwd");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("prelogin-cookie") != std::string::npos);
    bad = parse_gp_login_target("https://vpn.example.com/portal", "gateway");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("disagree") != std::string::npos);
    CHECK_FALSE(parse_gp_login_target("http://vpn.example.com/", ""));
}

TEST_CASE("traffic dump redacts every credential field and anything unknown") {
    auto text = redacted_form(
        "user=alice&passwd=hunter2&inputStr=abcd&authcookie=0123&portal-userauthcookie=x&prelogin-cookie=y"
        "&computer=pc&mystery=z&flag");
    CHECK(text ==
          "user=alice&passwd=<redacted>&inputStr=<redacted>&authcookie=<redacted>&portal-userauthcookie=<redacted>"
          "&prelogin-cookie=<redacted>&computer=pc&mystery=<redacted>&flag");
    CHECK(redacted_form("") == "");
    CHECK(redacted_form("tmp=tmp&clientVer=4100") == "tmp=tmp&clientVer=4100");
}

TEST_CASE("--authenticate lines are quoted as openconnect quotes them") {
    CHECK(cli::shell_quote("authcookie=ab&user=x") == "'authcookie=ab&user=x'");
    CHECK(cli::shell_quote("it's") == "'it'\\''s'");
    CHECK(cli::shell_quote("") == "''");
}

namespace {

// What the GP parser makes of a getconfig reply (routes, DNS, CISCO_CSTP_OPTIONS are its work).
gp::GpTunnelConfig sample_config() {
    auto r = gp::parse_tunnel_config_reply(
        "<response status=\"success\"><ip-address>10.200.0.2</ip-address><netmask>255.255.255.255</netmask>"
        "<ip-address-v6>fd00::2</ip-address-v6><dns><member>10.200.0.53</member></dns>"
        "<dns-v6><member>fd00::53</member></dns-v6><wins><member>10.200.0.54</member></wins>"
        "<dns-suffix><member>a.test</member><member>b.test</member></dns-suffix>"
        "<access-routes><member>10.200.0.0/16</member></access-routes>"
        "<access-routes-v6><member>fd00::/64</member></access-routes-v6>"
        "<exclude-access-routes><member>10.200.9.0/24</member></exclude-access-routes>"
        "<gw-address>10.200.0.1</gw-address><timeout>3600</timeout><lifetime>86400</lifetime>"
        "<disconnect-on-idle>900</disconnect-on-idle></response>");
    REQUIRE(r);
    gp::GpTunnelConfig c = std::move(std::get<gp::GpTunnelConfig>(*r));
    gp::GpIpsecConfig ipsec;
    ipsec.enc_algo = "aes-128-cbc";
    ipsec.hmac_algo = "sha1";
    ipsec.c2s.spi = 0xa5a5a5a5;
    ipsec.s2c.spi = 0x5a5a5a5a;
    ipsec.c2s.enc_key = std::move(Secret::from_hex("00112233445566778899aabbccddeeff").value());
    c.ipsec = std::move(ipsec);
    return c;
}

}  // namespace

TEST_CASE("getconfig maps onto TunnelConfig and keeps the ESP SA for the data path") {
    auto setup = map_gp_tunnel_config(sample_config(), "192.0.2.7");
    auto* s = &setup;
    const auto& c = s->config;
    CHECK(c.gateway_address == "192.0.2.7");
    CHECK(c.ip4_address == "10.200.0.2");
    CHECK(c.ip4_netmask == "255.255.255.255");
    CHECK(c.ip6_address == "fd00::2");
    CHECK(c.dns == std::vector<std::string>{"10.200.0.53", "fd00::53"});
    CHECK(c.nbns == std::vector<std::string>{"10.200.0.54"});
    CHECK(c.default_domain == "a.test b.test");
    CHECK(c.idle_timeout_s == 900);
    REQUIRE(c.split_include.size() == 2);
    CHECK(c.split_include[0].to_string() == "10.200.0.0/16");
    CHECK(c.split_include[1].to_string() == "fd00::/64");
    REQUIRE(c.split_exclude.size() == 1);
    CHECK(c.split_exclude[0].to_string() == "10.200.9.0/24");
    // CISCO_CSTP_OPTIONS as openconnect 9.01 builds it (newest first), v6 includes as includes.
    std::vector<std::string> opts;
    for (const auto& [k, v] : c.protocol_options) opts.push_back(k + "=" + v);
    CHECK(opts == std::vector<std::string>{"split-include=fd00::/64", "DNS=fd00::53", "ipaddr6=fd00::2",
                                           "split-exclude=10.200.9.0/24", "split-include=10.200.0.0/16",
                                           "search=a.test b.test", "WINS=10.200.0.54", "DNS=10.200.0.53",
                                           "netmask=255.255.255.255", "ipaddr=10.200.0.2"});
    REQUIRE(s->esp);
    CHECK(s->esp->peer_address == "192.0.2.7");
    CHECK(s->esp->udp_port == 4501);
    CHECK(s->esp->sa.c2s.spi == 0xa5a5a5a5);
    CHECK(s->esp->sa.c2s.enc_key.size() == 16);
    CHECK(s->esp->probe_ipv4 == "10.200.0.1");
    CHECK(s->esp->tunnel_ipv4 == "10.200.0.2");
    CHECK(s->esp->rekey_after_s == 3600);
    CHECK(s->cookie_lifetime_s == 86400);

    // With --proxy, ESP goes to the gateway's own address; none known: no ESP at all.
    auto proxied = map_gp_tunnel_config(sample_config(), "192.0.2.99", "192.0.2.7");
    CHECK(proxied.config.gateway_address == "192.0.2.99");
    CHECK(proxied.config.direct_udp_address == "192.0.2.7");
    REQUIRE(proxied.esp);
    CHECK(proxied.esp->peer_address == "192.0.2.7");
    auto unresolved = map_gp_tunnel_config(sample_config(), "192.0.2.99", "");
    CHECK_FALSE(unresolved.esp);

    auto text = describe_tunnel_setup(*s);
    CHECK(text.find("SPI out 0xa5a5a5a5 in 0x5a5a5a5a") != std::string::npos);
    CHECK(text.find("00112233") == std::string::npos);  // never keys

    auto full = sample_config();
    full.ipsec.reset();
    auto f = map_gp_tunnel_config(std::move(full), "192.0.2.7");
    CHECK_FALSE(f.esp);
    CHECK(describe_tunnel_setup(f).find("HTTPS tunnel only") != std::string::npos);
}

TEST_CASE("HIP report program: output, exit status, time and size bounds") {
    ProgramRun run;
    run.program = "/bin/sh";
    run.args = {"-c", "echo \"<hip-report>$APP_VERSION $1</hip-report>\"", "sh", "arg1"};
    run.extra_env = {"APP_VERSION=6.1.2"};
    auto out = run_for_output(run);
    REQUIRE(out);
    CHECK(*out == "<hip-report>6.1.2 arg1</hip-report>\n");

    run.args = {"-c", "echo oops >&2; exit 3"};
    out = run_for_output(run);
    REQUIRE_FALSE(out);
    CHECK(out.error().message.find("status 3") != std::string::npos);
    CHECK(out.error().message.find("oops") != std::string::npos);

    run.args = {"-c", "sleep 5"};
    run.timeout = std::chrono::milliseconds(200);
    out = run_for_output(run);
    REQUIRE_FALSE(out);
    CHECK(out.error().message.find("did not finish within 200 ms") != std::string::npos);

    run.args = {"-c", "head -c 100000 /dev/zero"};
    run.timeout = std::chrono::milliseconds(5000);
    run.max_output = 1000;
    out = run_for_output(run);
    REQUIRE_FALSE(out);
    CHECK(out.error().message.find("more than 1000 bytes") != std::string::npos);

    run.program = "/nonexistent/hip-script";
    run.args = {};
    out = run_for_output(run);
    REQUIRE_FALSE(out);
    CHECK(out.error().message.find("cannot run /nonexistent/hip-script") != std::string::npos);
}
