#include <doctest/doctest.h>

#include "fixture.h"
#include "protocols/gp/tunnel_config.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {

std::string hex_of(const Secret& s) {
    static const char d[] = "0123456789abcdef";
    std::string out;
    for (auto b : s.reveal()) {
        out += d[b >> 4];
        out += d[b & 15];
    }
    return out;
}

GpTunnelConfig must_parse(const std::string& body) {
    auto r = parse_tunnel_config_reply(body);
    if (!r.ok()) FAIL(r.error().message);
    REQUIRE(std::holds_alternative<GpTunnelConfig>(*r));
    return std::move(std::get<GpTunnelConfig>(*r));
}

std::string parse_error(const std::string& body) {
    auto r = parse_tunnel_config_reply(body);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
}

// A minimal valid reply with `extra` spliced in, and an <ipsec> block whose
// parts can be swapped.
std::string reply(const std::string& extra) {
    return "<response status=\"success\"><ip-address>10.0.0.2</ip-address>" + extra + "</response>";
}

std::string ipsec(const std::string& enc = "aes-128-cbc", const std::string& hmac = "sha1",
                  const std::string& c2s_spi = "0x11111111", int ebits = 128, int abits = 160,
                  const std::string& ekey_c2s = "") {
    auto key = [](int bits, char fill) { return std::string(static_cast<std::size_t>(bits / 4), fill); };
    auto k = [](const char* n, int bits, const std::string& v) {
        return std::string("<") + n + "><bits>" + std::to_string(bits) + "</bits><val>" + v +
               "</val></" + n + ">";
    };
    return "<ipsec><udp-port>4501</udp-port><ipsec-mode>esp-tunnel</ipsec-mode><enc-algo>" + enc +
           "</enc-algo><hmac-algo>" + hmac + "</hmac-algo><c2s-spi>" + c2s_spi +
           "</c2s-spi><s2c-spi>0x22222222</s2c-spi>" +
           k("ekey-c2s", ebits, ekey_c2s.empty() ? key(ebits, 'a') : ekey_c2s) +
           k("akey-c2s", abits, key(abits, 'b')) + k("ekey-s2c", ebits, key(ebits, 'c')) +
           k("akey-s2c", abits, key(abits, 'd')) + "</ipsec>";
}

}  // namespace

TEST_CASE("gp getconfig: the OC fake server's reply, misspelled </hmac-alog> and all") {
    GpTunnelConfig c = must_parse(gp_fixture("getconfig_fake_server.xml"));
    CHECK(c.tunnel.ip4_address == "192.168.77.12");
    CHECK(c.tunnel.ip6_address == "fd00::7a1f");
    CHECK(c.gw_address == "127.0.0.1");
    CHECK(c.gw_address_v6 == "::1");
    CHECK(c.tunnel.mtu == 0);
    CHECK(c.default_route);  // no access-routes at all
    REQUIRE(c.ipsec.has_value());
    const auto& s = *c.ipsec;
    CHECK(s.udp_port == 4501);
    CHECK(s.enc_algo == "aes-128-cbc");
    CHECK(s.hmac_algo == "sha1");
    CHECK(s.c2s.spi == 0xa5a5a5a5u);
    CHECK(s.s2c.spi == 0x5a5a5a5au);
    CHECK(hex_of(s.c2s.enc_key) == "deadbeefdeadbeefdeadbeefdeadbee1");
    CHECK(hex_of(s.c2s.auth_key) == "deadbeefdeadbeefdeadbeefdeadbeefdeadbee1");
    CHECK(hex_of(s.s2c.enc_key) == "deadbeefdeadbeefdeadbeefdeadbeef");
    CHECK(s.s2c.auth_key.size() == 20);
}

TEST_CASE("gp getconfig: a full reply with routes, DNS, lifetimes, sha256 SAs") {
    GpTunnelConfig c = must_parse(gp_fixture("getconfig_full.xml"));
    CHECK(c.tunnel.ip4_address == "10.20.30.40");
    CHECK(c.tunnel.ip4_netmask == "255.255.255.255");
    CHECK(c.tunnel.ip6_address == "2001:db8::1:2");  // canonical form
    CHECK(c.tunnel.ip6_prefix == 128);
    CHECK(c.tunnel.dns == std::vector<std::string>{"10.0.0.53", "10.0.1.53", "2001:db8::53"});
    CHECK(c.tunnel.nbns == std::vector<std::string>{"10.0.0.137"});
    CHECK(c.tunnel.default_domain == "corp.example.com example.com");
    REQUIRE(c.tunnel.split_include.size() == 4);
    CHECK(c.tunnel.split_include[0].to_string() == "10.0.0.0/8");
    CHECK(c.tunnel.split_include[2].to_string() == "10.0.0.53/32");
    CHECK(c.tunnel.split_include[3] == *IpPrefix::parse("2001:db8::/32"));
    CHECK(c.tunnel.split_include[3].v6);
    REQUIRE(c.tunnel.split_exclude.size() == 1);
    CHECK(c.tunnel.split_exclude[0].to_string() == "10.99.0.0/16");
    CHECK_FALSE(c.default_route);
    CHECK(c.gw_address == "203.0.113.7");
    CHECK(c.gw_address_v6.empty());
    CHECK(c.connected_gw_ip == "203.0.113.7");
    CHECK(c.timeout == 3600);
    CHECK(c.lifetime == 86400);
    CHECK(c.tunnel.idle_timeout_s == 10800);
    CHECK(c.quarantine == "no");
    REQUIRE(c.ipsec.has_value());
    CHECK(c.ipsec->enc_algo == "aes-256-cbc");
    CHECK(c.ipsec->hmac_algo == "sha256");
    CHECK(c.ipsec->c2s.spi == 0x5B1B67F8u);
    CHECK(c.ipsec->s2c.spi == 0x1BFB360Cu);
    CHECK(hex_of(c.ipsec->s2c.auth_key).substr(0, 4) == "6061");
}

TEST_CASE("gp getconfig: no <ipsec> means HTTPS only; full tunnel; 0.0.0.0 probe address") {
    GpTunnelConfig c = must_parse(reply(
        "<access-routes><member>0.0.0.0/0</member></access-routes><gw-address>0.0.0.0</gw-address>"
        "<mtu>1400</mtu>"));
    CHECK_FALSE(c.ipsec.has_value());
    CHECK(c.default_route);
    CHECK(c.tunnel.split_include.empty());  // empty = default route
    CHECK(c.gw_address.empty());
    CHECK(c.tunnel.mtu == 1400);
    // A default route among others: still a full tunnel; openconnect's CISCO_CSTP_OPTIONS list the others.
    GpTunnelConfig both = must_parse(reply(
        "<access-routes><member>10.1.0.0/16</member><member>0.0.0.0/0</member></access-routes>"));
    CHECK(both.default_route);
    CHECK(both.tunnel.split_include.empty());
    CHECK(both.tunnel.protocol_options.front() == std::pair<std::string, std::string>{"split-include", "10.1.0.0/16"});
    // netmask-style route and bare address
    GpTunnelConfig m = must_parse(reply(
        "<access-routes><member>192.168.0.0/255.255.0.0</member><member>10.9.9.9</member></access-routes>"));
    CHECK(m.tunnel.split_include[0].to_string() == "192.168.0.0/16");
    CHECK(m.tunnel.split_include[1].to_string() == "10.9.9.9/32");
}

TEST_CASE("gp getconfig: include/exclude-split-tunneling-domain members, wildcards and ports kept apart") {
    GpTunnelConfig c = must_parse(reply(
        "<include-split-tunneling-domain><member>Wiki.Corp.Test</member><member>*.apps.test:443</member>"
        "<member>wiki.corp.test</member><member></member><member>*</member></include-split-tunneling-domain>"
        "<exclude-split-tunneling-domain><member>*.cdn.test</member></exclude-split-tunneling-domain>"));
    REQUIRE(c.tunnel.split_include_domains.size() == 3);  // the repeat (case aside) once, the empty one skipped
    CHECK(c.tunnel.split_include_domains[0] == SplitDomain{"wiki.corp.test", false, 0});
    CHECK(c.tunnel.split_include_domains[1] == SplitDomain{"apps.test", true, 443});
    CHECK(c.tunnel.split_include_domains[1].to_string() == "*.apps.test:443");
    CHECK(c.tunnel.split_include_domains[2].to_string() == "*");
    REQUIRE(c.tunnel.split_exclude_domains.size() == 1);
    CHECK(c.tunnel.split_exclude_domains[0] == SplitDomain{"cdn.test", true, 0});
    CHECK(must_parse(reply("")).tunnel.split_include_domains.empty());
    auto err = parse_error(reply("<include-split-tunneling-domain><member>a b.test</member>"
                                 "</include-split-tunneling-domain>"));
    CHECK(err.find("<include-split-tunneling-domain/member>") != std::string::npos);
    err = parse_error(reply("<exclude-split-tunneling-domain><member>x.test:0</member>"
                            "</exclude-split-tunneling-domain>"));
    CHECK(err.find("<exclude-split-tunneling-domain/member>") != std::string::npos);
}

TEST_CASE("gp getconfig: the old aes128 spelling and GCM key+salt") {
    GpTunnelConfig old = must_parse(reply(ipsec("aes128")));
    CHECK(old.ipsec->enc_algo == "aes-128-cbc");
    GpTunnelConfig md5 = must_parse(reply(ipsec("aes-128-cbc", "md5", "0x11111111", 128, 128)));
    CHECK(md5.ipsec->c2s.auth_key.size() == 16);
    GpTunnelConfig gcm = must_parse(reply(ipsec("aes-256-gcm", "", "0x11111111", 288, 0)));
    CHECK(gcm.ipsec->c2s.enc_key.size() == 36);
    CHECK(gcm.ipsec->c2s.auth_key.empty());
    CHECK(gcm.ipsec->hmac_algo.empty());
}

TEST_CASE("gp getconfig: absurd values are rejected, naming the field") {
    auto has = [](const std::string& msg, const std::string& part) {
        INFO(msg);
        CHECK(msg.find(part) != std::string::npos);
    };
    has(parse_error("<response><netmask>1</netmask></response>"), "missing element <response/ip-address>");
    has(parse_error("<response><ip-address>10.0.0.x</ip-address></response>"), "<ip-address> is not an IPv4 address");
    has(parse_error(reply("<mtu>100</mtu>")), "<mtu> is \"100\"");
    has(parse_error(reply("<mtu>9001</mtu>")), "<mtu>");
    has(parse_error(reply("<mtu>-1</mtu>")), "<mtu>");
    has(parse_error(reply("<netmask>255.0.255.0</netmask>")), "<netmask> is not contiguous");
    has(parse_error(reply("<netmask>255.255.255.256</netmask>")), "<netmask>");
    has(parse_error(reply("<ip-address-v6>fd00::g</ip-address-v6>")), "<ip-address-v6>");
    has(parse_error(reply("<dns><member>dns.example</member></dns>")), "<dns/member>");
    has(parse_error(reply("<access-routes><member>10.0.0.0/33</member></access-routes>")), "<access-routes>");
    has(parse_error(reply("<access-routes-v6><member>::/129</member></access-routes-v6>")), "<access-routes-v6>");
    has(parse_error(reply("<exclude-access-routes><member>10.0.0.0/255.0.255.0</member></exclude-access-routes>")),
        "<exclude-access-routes> route '10.0.0.0/255.0.255.0': netmask is not contiguous");
    has(parse_error(reply("<gw-address>fd00::1</gw-address>")), "<gw-address>");
    has(parse_error(reply("<timeout>forever</timeout>")), "<timeout>");
    has(parse_error(reply("<ssl-tunnel-url>http://x/</ssl-tunnel-url>")), "<ssl-tunnel-url>");
    has(parse_error(reply("<dns-suffix><member>a b</member></dns-suffix>")), "<dns-suffix/member>");

    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "0x0"))), "<ipsec/c2s-spi> is a reserved SPI");
    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "0x1ffffffff"))), "<ipsec/c2s-spi>");
    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "spi"))), "<ipsec/c2s-spi>");
    has(parse_error(reply(ipsec("des", "sha1"))), "<ipsec/enc-algo> names an unsupported cipher \"des\"");
    has(parse_error(reply(ipsec("aes-128-cbc", "crc32"))), "<ipsec/hmac-algo>");
    // key of the wrong length for the algorithm (bits say 256, AES-128 wants 128)
    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "0x11111111", 256))), "<ipsec/ekey-c2s/bits>");
    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "0x11111111", 128, 128))), "<ipsec/akey-c2s/bits>");
    // bits right, val too short / not hex
    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "0x11111111", 128, 160, "abcd"))),
        "<ipsec/ekey-c2s/val> holds 2 bytes, expected 16");
    has(parse_error(reply(ipsec("aes-128-cbc", "sha1", "0x11111111", 128, 160, std::string(32, 'z')))),
        "<ipsec/ekey-c2s/val> is not hex");
    // GCM without the salt
    has(parse_error(reply(ipsec("aes-128-gcm", "", "0x11111111", 128, 0))), "expected 160");
    std::string no_port = reply(ipsec());
    no_port.replace(no_port.find("4501"), 4, "70000");
    has(parse_error(no_port), "<ipsec/udp-port>");
    std::string transport = reply(ipsec());
    transport.replace(transport.find("esp-tunnel"), 10, "esp-transport");
    has(parse_error(transport), "<ipsec/ipsec-mode>");
    std::string no_key = reply(ipsec());
    no_key.replace(no_key.find("akey-s2c"), 8, "akey-xyz");
    has(parse_error(no_key), "missing element <ipsec/akey-s2c>");
}

TEST_CASE("gp getconfig: route count is capped") {
    std::string many = "<access-routes>";
    for (int i = 0; i < 4097; ++i)
        many += "<member>10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".0/24</member>";
    many += "</access-routes>";
    auto r = parse_tunnel_config_reply(reply(many));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("more than 4096 routes") != std::string::npos);
}

TEST_CASE("gp getconfig: errors and wrong roots") {
    auto e = parse_tunnel_config_reply(
        R"(<response status="error"><error>Assign private IP address failed</error></response>)");
    REQUIRE(e.ok());
    CHECK(std::get<GpServerError>(*e).message == "Assign private IP address failed");
    auto txt = parse_tunnel_config_reply("errors getting SSL/VPN config");
    REQUIRE(txt.ok());
    CHECK(std::get<GpServerError>(*txt).kind == GpErrorKind::CookieRejected);
    CHECK(parse_error("<policy/>") == "unexpected root <policy>, expected <response>");
}
