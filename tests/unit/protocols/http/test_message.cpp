#include <doctest/doctest.h>

#include "protocols/http/message.h"

using namespace espvpn;
using namespace espvpn::http;

TEST_CASE("Headers: case-insensitive lookup, repeated fields kept in order") {
    Headers h;
    h.add("Content-Type", "text/xml");
    h.add("X-Thing", "1");
    h.add("x-thing", "2");
    CHECK(h.get("content-type") == "text/xml");
    CHECK(h.get("X-THING") == "1");
    CHECK(h.get_all("x-Thing") == std::vector<std::string_view>{"1", "2"});
    CHECK_FALSE(h.get("Missing").has_value());
    h.set("X-Thing", "3");
    CHECK(h.get_all("x-thing") == std::vector<std::string_view>{"3"});
    h.add("Connection", "keep-alive, Close");
    CHECK(h.list_contains("connection", "close"));
    CHECK_FALSE(h.list_contains("connection", "upgrade"));
}

TEST_CASE("serialize: request line, Host with port only when not 443, headers in order, body") {
    Request r;
    r.method = "POST";
    r.target = "/ssl-vpn/login.esp";
    r.host = "vpn.example.com";
    r.headers.add("User-Agent", "PAN GlobalProtect");
    r.headers.add("Content-Type", "application/x-www-form-urlencoded");
    r.cookie = Secret::from_string("PHPSESSID=abc");
    r.body = Secret::from_string("user=a&passwd=secret");
    auto wire = serialize(r);
    REQUIRE(wire.ok());
    CHECK(wire->reveal_text() ==
          "POST /ssl-vpn/login.esp HTTP/1.1\r\n"
          "Host: vpn.example.com\r\n"
          "User-Agent: PAN GlobalProtect\r\n"
          "Content-Type: application/x-www-form-urlencoded\r\n"
          "Cookie: PHPSESSID=abc\r\n"
          "Content-Length: 20\r\n"
          "\r\n"
          "user=a&passwd=secret");

    Request g;
    g.host = "::1";
    g.port = 8443;
    auto get = serialize(g);
    REQUIRE(get.ok());
    CHECK(get->reveal_text() == "GET / HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");

    Request empty_post;
    empty_post.method = "POST";
    empty_post.host = "h";
    CHECK(serialize(empty_post)->reveal_text() == "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
}

TEST_CASE("serialize refuses header injection and malformed parts") {
    auto bad = [](auto mutate) {
        Request r;
        r.host = "h";
        mutate(r);
        return serialize(r);
    };
    CHECK_FALSE(bad([](Request& r) { r.headers.add("X", "a\r\nEvil: 1"); }).ok());
    CHECK_FALSE(bad([](Request& r) { r.headers.add("Bad Name", "a"); }).ok());
    CHECK_FALSE(bad([](Request& r) { r.headers.add("Host", "other"); }).ok());
    CHECK_FALSE(bad([](Request& r) { r.target = "/a b"; }).ok());
    CHECK_FALSE(bad([](Request& r) { r.target = "/a\nb"; }).ok());
    CHECK_FALSE(bad([](Request& r) { r.method = "GE T"; }).ok());
    CHECK_FALSE(bad([](Request& r) { r.host = "a\r\nb"; }).ok());
    CHECK_FALSE(bad([](Request& r) { r.cookie = Secret::from_string("a=1\r\nX: y"); }).ok());
    auto e = bad([](Request& r) { r.headers.add("X-Evil", "a\nb"); });
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().message.find("X-Evil") != std::string::npos);
}
