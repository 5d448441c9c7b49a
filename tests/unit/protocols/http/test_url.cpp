#include <doctest/doctest.h>

#include "protocols/http/url.h"

using namespace espvpn;
using namespace espvpn::http;

TEST_CASE("parse_url: https URLs, bare hosts, ports, IPv6, normalised paths") {
    auto u = parse_url("https://VPN.Example.com:8443/global-protect/prelogin.esp?tmp=1#frag");
    REQUIRE(u.ok());
    CHECK(u->host == "vpn.example.com");
    CHECK(u->port == 8443);
    CHECK(u->target == "/global-protect/prelogin.esp?tmp=1");
    CHECK(u->to_string() == "https://vpn.example.com:8443/global-protect/prelogin.esp?tmp=1");

    auto bare = parse_url("gw.example.com");
    REQUIRE(bare.ok());
    CHECK(bare->port == 443);
    CHECK(bare->target == "/");
    CHECK(bare->to_string() == "https://gw.example.com/");

    auto v6 = parse_url("https://[fd00:201::1]:4443/a/./b/../c");
    REQUIRE(v6.ok());
    CHECK(v6->host == "fd00:201::1");
    CHECK(v6->port == 4443);
    CHECK(v6->target == "/a/c");
    CHECK(v6->to_string() == "https://[fd00:201::1]:4443/a/c");

    CHECK(parse_url("https://h?x=1")->target == "/?x=1");
}

TEST_CASE("parse_url: a bare IPv6 address (as portals list gateways) is the whole host, port 443") {
    auto bare = parse_url("FD00:201::1");
    REQUIRE(bare.ok());
    CHECK(bare->host == "fd00:201::1");
    CHECK(bare->port == 443);
    CHECK(bare->to_string() == "https://[fd00:201::1]/");
    auto with_path = parse_url("https://2001:db8::10/gp");
    REQUIRE(with_path.ok());
    CHECK(with_path->host == "2001:db8::10");
    CHECK(with_path->target == "/gp");
    CHECK(parse_url("::ffff:192.0.2.1")->host == "::ffff:192.0.2.1");
    // "host:port" stays a name and a port; a port after a bare address is not guessed at.
    CHECK(parse_url("gw.example.com:4443")->port == 4443);
    auto junk = parse_url("https://gw.example:44:3/");
    REQUIRE_FALSE(junk.ok());
    CHECK(junk.error().message.find("needs brackets") != std::string::npos);
}

TEST_CASE("parse_url rejects insecure, malformed and ambiguous URLs with a reason") {
    auto http = parse_url("http://vpn.example.com/");
    REQUIRE_FALSE(http.ok());
    CHECK(http.error().message.find("insecure") != std::string::npos);
    CHECK_FALSE(parse_url("ftp://h/").ok());
    CHECK_FALSE(parse_url("https://user:pw@h/").ok());
    CHECK_FALSE(parse_url("https://h:0/").ok());
    CHECK_FALSE(parse_url("https://h:65536/").ok());
    CHECK_FALSE(parse_url("https://h:/").ok());
    CHECK_FALSE(parse_url("https://h:12a/").ok());
    CHECK_FALSE(parse_url("https:///path").ok());
    CHECK_FALSE(parse_url("https://[::1/").ok());
    CHECK_FALSE(parse_url("https://h/a b").ok());
    CHECK_FALSE(parse_url("https://h\r\n/").ok());
}

TEST_CASE("resolve_location: absolute, scheme-relative, absolute-path, relative, query-only") {
    Url base = *parse_url("https://portal.example.com/global-protect/login/prelogin.esp?a=1");
    auto r = [&](std::string_view loc) {
        auto u = resolve_location(base, loc);
        REQUIRE_MESSAGE(u.ok(), loc);
        return u->to_string();
    };
    CHECK(r("https://gw.example.com:4443/ssl-vpn/x") == "https://gw.example.com:4443/ssl-vpn/x");
    CHECK(r("//other.example.com/p") == "https://other.example.com/p");
    CHECK(r("/ssl-vpn/prelogin.esp") == "https://portal.example.com/ssl-vpn/prelogin.esp");
    CHECK(r("getconfig.esp") == "https://portal.example.com/global-protect/login/getconfig.esp");
    CHECK(r("../up?x=2") == "https://portal.example.com/global-protect/up?x=2");
    CHECK(r("../../../../top") == "https://portal.example.com/top");
    CHECK(r("?b=2") == "https://portal.example.com/global-protect/login/prelogin.esp?b=2");
    CHECK(r("  /spaced  ") == "https://portal.example.com/spaced");
    CHECK(r("/x#frag") == "https://portal.example.com/x");
    CHECK_FALSE(resolve_location(base, "http://gw.example.com/").ok());
    CHECK_FALSE(resolve_location(base, "javascript:alert(1)").ok());
    CHECK_FALSE(resolve_location(base, "").ok());
    CHECK_FALSE(resolve_location(base, "/a\x01z").ok());
}

TEST_CASE("redirect_action: method rules per status") {
    CHECK(redirect_action(301, "POST").method == "GET");
    CHECK_FALSE(redirect_action(302, "POST").keep_body);
    CHECK(redirect_action(302, "GET").method == "GET");
    CHECK(redirect_action(303, "POST").method == "GET");
    CHECK(redirect_action(303, "HEAD").method == "HEAD");
    CHECK(redirect_action(303, "PUT").method == "GET");
    CHECK(redirect_action(307, "POST").method == "POST");
    CHECK(redirect_action(307, "POST").keep_body);
    CHECK(redirect_action(308, "POST").method == "POST");
    CHECK(redirect_action(308, "POST").keep_body);
}
