#include <doctest/doctest.h>

#include <string>

#include "protocols/captive/captive_probe.h"

using namespace espvpn;
using namespace espvpn::captive;

namespace {

ProbeSpec spec() { return parse_probe_spec("http://probe.example/check.txt").value(); }

ProbeAnswer answer(int status, std::string location = {}, std::string body = {}, bool truncated = false) {
    return ProbeAnswer{status, std::move(location), std::move(body), truncated};
}

bool printable(const std::string& s) {
    for (unsigned char c : s)
        if (c <= 0x20 || c >= 0x7f) return false;
    return true;
}

bool no_controls(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c >= 0x7f) return false;
    return true;
}

}  // namespace

TEST_CASE("captive probe: URL and expected body from the option; http:// only") {
    const ProbeSpec d = default_probe_spec();
    CHECK(d.url.host == "nmcheck.gnome.org");
    CHECK(d.url.port == 80);
    CHECK(d.url.target == "/check_network_status.txt");
    CHECK(d.expected == "NetworkManager is online");

    auto s = parse_probe_spec("http://[fd00::1]:8080/a?b=c, It works ");
    REQUIRE(s.ok());
    CHECK(s->url.host == "fd00::1");
    CHECK(s->url.port == 8080);
    CHECK(s->url.target == "/a?b=c");
    CHECK(s->expected == "It works");
    CHECK(s->url.text() == "http://[fd00::1]:8080/a?b=c");
    CHECK(parse_probe_spec("HTTP://Probe.Example").value().url.text() == "http://probe.example/");

    for (const char* bad : {"https://probe.example/", "probe.example/x", "http://user@probe.example/", "http://:80/",
                            "http://probe.example:0/", "http://probe.example:99999/", "http://probe.example:/",
                            "http://pro be.example/", "http://probe.example/a b", "http://[fd00::1/",
                            "http://probe.example/\x1b[31m"})
        CHECK_MESSAGE(!parse_probe_spec(bad).ok(), bad);
}

TEST_CASE("captive probe: the expected body means open, a redirect or another page a portal") {
    CHECK(classify(spec(), answer(200, {}, "NetworkManager is online\n")).kind == Verdict::Kind::online);
    // the expected body, cut: not the expected answer
    CHECK(classify(spec(), answer(200, {}, "NetworkManager is online", true)).kind == Verdict::Kind::portal);

    Verdict v = classify(spec(), answer(200, {}, "<html>Welcome to the hotel</html>"));
    CHECK(v.kind == Verdict::Kind::portal);
    CHECK(v.portal_url == "http://probe.example/check.txt");  // the portal answers in place

    v = classify(spec(), answer(302, "https://portal.hotel.example/login?next=1"));
    CHECK(v.kind == Verdict::Kind::portal);
    CHECK(v.portal_url == "https://portal.hotel.example/login?next=1");
    CHECK(classify(spec(), answer(307, "/login")).portal_url == "http://probe.example/login");
    CHECK(classify(spec(), answer(301, "login.html")).portal_url == "http://probe.example/login.html");
    CHECK(classify(spec(), answer(303, "//portal.example/x")).portal_url == "http://portal.example/x");
    // no Location, another scheme, a monster: the probe's own URL
    CHECK(classify(spec(), answer(302)).portal_url == "http://probe.example/check.txt");
    CHECK(classify(spec(), answer(302, "javascript:alert(1)")).portal_url == "http://probe.example/check.txt");
    CHECK(classify(spec(), answer(302, "file:///etc/passwd")).portal_url == "http://probe.example/check.txt");
    CHECK(classify(spec(), answer(302, "http://x/" + std::string(5000, 'a'))).portal_url ==
          "http://probe.example/check.txt");

    // errors say nothing about a portal
    for (int status : {0, 204, 404, 500, 503})
        CHECK(classify(spec(), answer(status, {}, "x")).kind != Verdict::Kind::online);
    CHECK(classify(spec(), answer(500)).kind == Verdict::Kind::unknown);
    CHECK(classify(spec(), answer(404, "http://x/")).kind == Verdict::Kind::unknown);
}

TEST_CASE("captive probe: the portal's URL reaches no terminal raw") {
    const std::string hostile = "http://portal.example/login?x=\x1b]0;owned\x07\r\nSet: y\x9b" "31m\xff end";
    Verdict v = classify(spec(), answer(302, hostile));
    CHECK(v.kind == Verdict::Kind::portal);
    CHECK(printable(v.portal_url));
    CHECK(v.portal_url == "http://portal.example/login?x=%1B]0;owned%07%0D%0ASet:%20y%9B31m%FF%20end");
    CHECK(no_controls(v.why));
    CHECK(printable_url("a b\tc\x7f") == "a%20b%09c%7F");
    // a body with escapes: the verdict's text names its size only
    v = classify(spec(), answer(200, {}, std::string("\x1b[2J\x1b]52;c;AAAA\x07", 15)));
    CHECK(printable(v.portal_url));
    CHECK(v.why.find('\x1b') == std::string::npos);
}
