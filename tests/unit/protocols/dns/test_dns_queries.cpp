#include <doctest/doctest.h>

#include "protocols/dns/dns_queries.h"

using namespace espvpn;
using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using Clock = DnsQueries::Clock;

namespace {

// The server's reply to `query`: NOERROR (or `rcode`), one A/AAAA record per address given.
Bytes reply(const Bytes& query, std::vector<Bytes> rdatas, unsigned rcode = 0) {
    Bytes r = query;
    r[2] = 0x81;
    r[3] = static_cast<std::uint8_t>(0x80 | rcode);
    r[7] = static_cast<std::uint8_t>(rdatas.size());
    const std::uint8_t type = query[query.size() - 3];
    for (const Bytes& d : rdatas) {
        r.insert(r.end(), {0xC0, 12, 0, type, 0, 1, 0, 0, 0, 60, 0, static_cast<std::uint8_t>(d.size())});
        r.insert(r.end(), d.begin(), d.end());
    }
    return r;
}

}  // namespace

TEST_CASE("DNS queries: a reply is matched by id, server and question") {
    const Clock::time_point t0{};
    DnsQueries q(2000ms);
    auto a = q.start(0x1111, 0, DnsType::a, "wiki.test", 0, t0);
    REQUIRE(a.ok());
    auto aaaa = q.start(0x2222, 0, DnsType::aaaa, "wiki.test", 1, t0);
    REQUIRE(aaaa.ok());
    CHECK(q.size() == 2);
    CHECK(q.in_flight(0, DnsType::a));
    CHECK(q.id_in_use(0x2222));

    // Another id, and the right id from the wrong server: ignored, still in flight.
    Bytes stray = reply(*a, {{10, 0, 0, 1}});
    stray[1] = 0x12;
    CHECK_FALSE(q.on_reply(0, stray).has_value());
    CHECK_FALSE(q.on_reply(1, reply(*a, {{10, 0, 0, 1}})).has_value());
    CHECK_FALSE(q.on_reply(0, Bytes{0x11}).has_value());
    CHECK(q.stray() == 3);
    CHECK(q.size() == 2);

    auto o = q.on_reply(0, reply(*a, {{10, 0, 0, 1}, {10, 0, 0, 2}}));
    REQUIRE(o.has_value());
    CHECK(o->ok);
    CHECK(o->rule == 0);
    CHECK(o->type == DnsType::a);
    REQUIRE(o->addresses.size() == 2);
    CHECK(o->addresses[1].to_string() == "10.0.0.2");
    CHECK_FALSE(q.in_flight(0, DnsType::a));
    // A second copy of the same reply answers nothing any more.
    CHECK_FALSE(q.on_reply(0, reply(*a, {{10, 0, 0, 1}})).has_value());

    // The right id and server but another question (a spoof or a confused server): a failure.
    Bytes other = *build_dns_query(0x2222, "evil.test", DnsType::aaaa);
    o = q.on_reply(1, reply(other, {}));
    REQUIRE(o.has_value());
    CHECK_FALSE(o->ok);
    CHECK(o->type == DnsType::aaaa);
    CHECK(o->error.find("another question") != std::string::npos);
    CHECK(q.size() == 0);
}

TEST_CASE("DNS queries: SERVFAIL is a failure, NXDOMAIN an empty answer") {
    DnsQueries q;
    auto a = q.start(1, 3, DnsType::a, "gone.test", 0, Clock::time_point{});
    REQUIRE(a.ok());
    auto o = q.on_reply(0, reply(*a, {}, 2));
    REQUIRE(o.has_value());
    CHECK_FALSE(o->ok);
    CHECK(o->rule == 3);
    auto b = q.start(2, 3, DnsType::a, "gone.test", 0, Clock::time_point{});
    REQUIRE(b.ok());
    o = q.on_reply(0, reply(*b, {}, 3));
    REQUIRE(o.has_value());
    CHECK(o->ok);
    CHECK(o->addresses.empty());
}

TEST_CASE("DNS queries: refused starts, timeouts, the earliest deadline") {
    const Clock::time_point t0{};
    DnsQueries q(2000ms, 2);
    CHECK_FALSE(q.next_deadline().has_value());
    REQUIRE(q.start(5, 0, DnsType::a, "a.test", 0, t0).ok());
    CHECK_FALSE(q.start(5, 1, DnsType::a, "b.test", 0, t0).ok());  // id in use
    CHECK_FALSE(q.start(6, 0, DnsType::a, "a.test", 0, t0).ok());  // (rule, type) in flight
    CHECK_FALSE(q.start(7, 1, DnsType::a, "bad..name", 0, t0).ok());
    CHECK(q.size() == 1);
    REQUIRE(q.start(8, 0, DnsType::aaaa, "a.test", 0, t0 + 500ms).ok());
    CHECK_FALSE(q.start(9, 2, DnsType::a, "c.test", 0, t0).ok());  // max_in_flight
    CHECK(*q.next_deadline() == t0 + 2000ms);

    CHECK(q.take_timeouts(t0 + 1999ms).empty());
    auto late = q.take_timeouts(t0 + 2000ms);
    REQUIRE(late.size() == 1);
    CHECK_FALSE(late[0].ok);
    CHECK(late[0].type == DnsType::a);
    CHECK(late[0].error == "no reply within 2000 ms");
    CHECK(*q.next_deadline() == t0 + 2500ms);
    CHECK(q.take_timeouts(t0 + 3s).size() == 1);
    CHECK(q.size() == 0);
    // A reply after its timeout is stray.
    auto again = build_dns_query(5, "a.test", DnsType::a);
    CHECK_FALSE(q.on_reply(0, reply(*again, {{10, 0, 0, 1}})).has_value());
}
