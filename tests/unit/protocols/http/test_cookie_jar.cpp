#include <doctest/doctest.h>

#include <sstream>

#include "protocols/http/cookie_jar.h"

using namespace espvpn;
using namespace espvpn::http;
using namespace std::chrono;

namespace {

Secret line(std::string_view text) { return Secret::from_string(text); }

Clock::time_point at(int y, unsigned m, unsigned d, int h = 0, int min = 0, int s = 0) {
    return time_point_cast<Clock::duration>(sys_days(year(y) / month(m) / day(d)) + hours(h) + minutes(min) +
                                            seconds(s));
}

}  // namespace

TEST_CASE("cookie dates in the formats servers send") {
    CHECK(parse_cookie_date("Sun, 06 Nov 1994 08:49:37 GMT") == at(1994, 11, 6, 8, 49, 37));
    CHECK(parse_cookie_date("Sunday, 06-Nov-94 08:49:37 GMT") == at(1994, 11, 6, 8, 49, 37));
    CHECK(parse_cookie_date("Sun Nov  6 08:49:37 1994") == at(1994, 11, 6, 8, 49, 37));
    CHECK(parse_cookie_date("Thu, 01 Jan 1970 22:00:00 GMT") == at(1970, 1, 1, 22));
    CHECK(parse_cookie_date("Wed, 01-Jan-2031 00:00:01 GMT") == at(2031, 1, 1, 0, 0, 1));
    CHECK_FALSE(parse_cookie_date("").has_value());
    CHECK_FALSE(parse_cookie_date("yesterday").has_value());
    CHECK_FALSE(parse_cookie_date("Sun, 31 Feb 2020 00:00:00 GMT").has_value());
    CHECK_FALSE(parse_cookie_date("Sun, 06 Nov 1994 25:00:00 GMT").has_value());
}

TEST_CASE("cookie dates outside the clock's range are clamped, not overflowed (fuzz finding)") {
    // Nanoseconds since 1970 in 64 bits end in 2262 and begin in 1677.
    CHECK(parse_cookie_date("Thu, 01 Jan 9535 00:10:00 GMT") == at(2200, 1, 1));
    CHECK(parse_cookie_date("Fri, 31 Dec 9999 23:59:59 GMT") == at(2200, 1, 1));
    CHECK(parse_cookie_date("Mon, 01 Jan 1601 00:00:00 GMT") == Clock::time_point{});
    CookieJar jar;
    REQUIRE(jar.store("vpn.example.com", "/", line("c=v; Expires=Thu, 01 Jan 9535 00:10:00 GMT"), at(2030, 1, 1)).ok());
    CHECK(jar.cookie_header("vpn.example.com", "/", at(2030, 1, 1)).reveal_text() == "c=v");
}

TEST_CASE("Set-Cookie is stored and sent back to the same host; values never print") {
    CookieJar jar;
    REQUIRE(jar.store("vpn.example.com", "/ssl-vpn/login.esp", line("PHPSESSID=abc123; path=/; Secure; HttpOnly")).ok());
    REQUIRE(jar.store("vpn.example.com", "/", line("webvpn=AAAA/bbb+cc==; Secure")).ok());
    CHECK(jar.cookie_header("vpn.example.com", "/ssl-vpn/getconfig.esp").reveal_text() ==
          "PHPSESSID=abc123; webvpn=AAAA/bbb+cc==");
    CHECK(jar.cookie_header("VPN.example.com", "/").reveal_text() == "PHPSESSID=abc123; webvpn=AAAA/bbb+cc==");
    // Host-only: not for another host or a subdomain.
    CHECK(jar.cookie_header("other.example.com", "/").empty());
    CHECK(jar.cookie_header("a.vpn.example.com", "/").empty());
    const Secret* webvpn = jar.find("vpn.example.com", "webvpn");
    REQUIRE(webvpn != nullptr);
    CHECK(webvpn->reveal_text() == "AAAA/bbb+cc==");
    std::ostringstream os;
    os << *webvpn << jar.cookie_header("vpn.example.com", "/");
    CHECK(os.str().find("abc123") == std::string::npos);
}

TEST_CASE("Domain attribute: covers subdomains, must cover the request host") {
    CookieJar jar;
    REQUIRE(jar.store("portal.example.com", "/", line("d=1; Domain=.Example.com")).ok());
    CHECK(jar.cookie_header("gw.example.com", "/").reveal_text() == "d=1");
    CHECK(jar.cookie_header("example.com", "/").reveal_text() == "d=1");
    CHECK(jar.cookie_header("badexample.com", "/").empty());
    auto foreign = jar.store("portal.example.com", "/", line("e=1; Domain=evil.com"));
    REQUIRE_FALSE(foreign.ok());
    CHECK(foreign.error().message.find("evil.com") != std::string::npos);
    CHECK(jar.size() == 1);
    // An IP address host never domain-matches a suffix.
    CHECK_FALSE(domain_matches("10.0.0.1", "0.0.1"));
    CHECK(domain_matches("10.0.0.1", "10.0.0.1"));
}

TEST_CASE("Path matching and default path; longer paths first") {
    CHECK(path_matches("/ssl-vpn/login.esp", "/ssl-vpn"));
    CHECK(path_matches("/ssl-vpn/login.esp", "/ssl-vpn/"));
    CHECK(path_matches("/ssl-vpn", "/ssl-vpn"));
    CHECK(path_matches("/ssl-vpn?x", "/ssl-vpn"));
    CHECK_FALSE(path_matches("/ssl-vpnx", "/ssl-vpn"));
    CHECK_FALSE(path_matches("/", "/ssl-vpn"));

    CookieJar jar;
    REQUIRE(jar.store("h", "/", line("root=1")).ok());
    REQUIRE(jar.store("h", "/", line("deep=2; Path=/a/b")).ok());
    REQUIRE(jar.store("h", "/a/b/page.esp", line("dflt=3")).ok());  // default path /a/b
    REQUIRE(jar.store("h", "/", line("bad=4; Path=relative")).ok());  // invalid Path -> default "/"
    CHECK(jar.cookie_header("h", "/a/b/c").reveal_text() == "deep=2; dflt=3; root=1; bad=4");
    CHECK(jar.cookie_header("h", "/a").reveal_text() == "root=1; bad=4");
}

TEST_CASE("Expires and Max-Age: expiry, deletion, Max-Age wins, replacement keeps order") {
    const auto now = at(2026, 1, 1);
    CookieJar jar;
    REQUIRE(jar.store("h", "/", line("a=1; Max-Age=60"), now).ok());
    REQUIRE(jar.store("h", "/", line("b=2; Expires=Thu, 01 Jan 2026 00:10:00 GMT"), now).ok());
    REQUIRE(jar.store("h", "/", line("c=3; Expires=Thu, 01 Jan 2026 00:10:00 GMT; Max-Age=1"), now).ok());
    CHECK(jar.cookie_header("h", "/", now).reveal_text() == "a=1; b=2; c=3");
    CHECK(jar.cookie_header("h", "/", now + seconds(2)).reveal_text() == "a=1; b=2");
    CHECK(jar.cookie_header("h", "/", now + seconds(61)).reveal_text() == "b=2");
    CHECK(jar.cookie_header("h", "/", now + minutes(11)).empty());

    // ocserv clears webvpnc with an expiry in the past, then sets it again.
    REQUIRE(jar.store("h", "/", line("a=new"), now).ok());
    REQUIRE(jar.store("h", "/", line("webvpnc=; expires=Thu, 01 Jan 1970 22:00:00 GMT; path=/"), now).ok());
    CHECK(jar.find("h", "webvpnc", now) == nullptr);
    REQUIRE(jar.store("h", "/", line("b=gone; Max-Age=0"), now).ok());
    CHECK(jar.find("h", "b", now) == nullptr);
    CHECK(jar.cookie_header("h", "/", now).reveal_text() == "a=new; c=3");
}

TEST_CASE("malformed Set-Cookie lines are refused; the jar is bounded") {
    CookieJar jar;
    CHECK_FALSE(jar.store("h", "/", line("novalue")).ok());
    CHECK_FALSE(jar.store("h", "/", line("=v")).ok());
    CHECK_FALSE(jar.store("h", "/", line("a b=v")).ok());
    CHECK_FALSE(jar.store("h", "/", line(std::string("a=x\x01y"))).ok());
    CHECK_FALSE(jar.store("h", "/", line("a=" + std::string(9000, 'x'))).ok());
    CHECK(jar.size() == 0);
    REQUIRE(jar.store("h", "/", line("quoted=\"a b\"; Max-Age=junk")).ok());
    CHECK(jar.cookie_header("h", "/").reveal_text() == "quoted=\"a b\"");
    for (std::size_t i = 1; i < CookieJar::kMaxCookies; ++i)
        REQUIRE(jar.store("h", "/", line("c" + std::to_string(i) + "=1")).ok());
    CHECK_FALSE(jar.store("h", "/", line("onetoomany=1")).ok());
    CHECK(jar.store("h", "/", line("c1=replaced")).ok());  // replacing still works when full
}

TEST_CASE("set() injects a cookie (e.g. a session cookie from the command line)") {
    CookieJar jar;
    jar.set("gw.example.com", "webvpn", Secret::from_string("v=="));
    jar.set("gw.example.com", "webvpn", Secret::from_string("w=="));
    CHECK(jar.size() == 1);
    CHECK(jar.cookie_header("gw.example.com", "/CSCOSSLC/tunnel").reveal_text() == "webvpn=w==");
}
