#include <doctest/doctest.h>

#include "protocols/tunnel/tunnel_config.h"

using namespace espvpn;

TEST_CASE("IpPrefix parses CIDR, dotted masks and bare addresses, clearing host bits") {
    auto a = IpPrefix::parse("10.99.5.7/255.255.255.0");
    REQUIRE(a.ok());
    CHECK(a->to_string() == "10.99.5.0/24");
    CHECK(a->netmask() == "255.255.255.0");
    auto b = IpPrefix::parse("172.30.1.1/16");
    REQUIRE(b.ok());
    CHECK(b->address() == "172.30.0.0");
    auto c = IpPrefix::parse("192.0.2.1");
    REQUIRE(c.ok());
    CHECK(c->length == 32);
    auto d = IpPrefix::parse("fd00:1:2:3::5/64");
    REQUIRE(d.ok());
    CHECK(d->v6);
    CHECK(d->to_string() == "fd00:1:2:3::/64");
    auto e = IpPrefix::parse("0.0.0.0/0");
    REQUIRE(e.ok());
    CHECK(e->netmask() == "0.0.0.0");
}

TEST_CASE("IpPrefix rejects bad routes with a reason") {
    for (const char* bad : {"10.0.0.0/33", "fd00::/129", "10.0.0.0/255.0.255.0", "hello/8",
                            "10.0.0.0/", "10.0.0.0/1a", ""}) {
        CAPTURE(bad);
        auto r = IpPrefix::parse(bad);
        CHECK_FALSE(r.ok());
        if (!r.ok()) CHECK(r.error().message.find("route") != std::string::npos);
    }
}

TEST_CASE("netmask_length and normalise_ip") {
    CHECK(*netmask_length("255.255.255.0") == 24);
    CHECK(*netmask_length("0.0.0.0") == 0);
    CHECK(*netmask_length("255.255.255.255") == 32);
    CHECK_FALSE(netmask_length("255.0.255.0").ok());
    bool v6 = false;
    CHECK(*normalise_ip("FD00:0::1", &v6) == "fd00::1");
    CHECK(v6);
    CHECK_FALSE(normalise_ip("10.0.0.256").ok());
}

TEST_CASE("parse_address_length: the one prefix grammar keeps the host bits; IpPrefix clears them") {
    auto a = parse_address_length("10.99.5.7/255.255.255.0");
    REQUIRE(a.ok());
    CHECK_FALSE(a->v6);
    CHECK(a->length == 24);
    CHECK(a->bytes[3] == 7);
    CHECK(IpPrefix::parse("10.99.5.7/255.255.255.0")->bytes[3] == 0);
    auto b = parse_address_length("fd00::5");
    REQUIRE(b.ok());
    CHECK(b->v6);
    CHECK(b->length == 128);
    CHECK(b->bytes[15] == 5);
    CHECK(parse_address_length("10.0.0.1/33").error().message == "'10.0.0.1/33': prefix length over 32");
    CHECK(IpPrefix::parse("10.0.0.1/33").error().message == "route '10.0.0.1/33': prefix length over 32");
}

TEST_CASE("SplitDomain: plain, wildcard, port; bad names and ports rejected") {
    auto d = SplitDomain::parse("*.Corp.Example.com:443");
    REQUIRE(d.ok());
    CHECK(d->name == "corp.example.com");
    CHECK(d->wildcard);
    CHECK(d->port == 443);
    CHECK(d->to_string() == "*.corp.example.com:443");
    d = SplitDomain::parse("wiki.example.com.");
    REQUIRE(d.ok());
    CHECK(d->to_string() == "wiki.example.com");
    CHECK_FALSE(d->wildcard);
    d = SplitDomain::parse("*");
    REQUIRE(d.ok());
    CHECK((d->wildcard && d->name.empty() && d->to_string() == "*"));
    for (const char* bad : {"", ".", "a..b", "a b", "x.test:", "x.test:0", "x.test:65536", "x.test:44a", "**.x",
                            "x.*.test", "x;rm", "\"x\"", "*.", "x.test:99999999999"}) {
        INFO(bad);
        CHECK_FALSE(SplitDomain::parse(bad).ok());
    }
    CHECK_FALSE(SplitDomain::parse(std::string(64, 'a') + ".test").ok());
    CHECK(SplitDomain::parse(std::string(63, 'a') + ".test").ok());
}
