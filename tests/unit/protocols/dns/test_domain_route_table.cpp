#include <doctest/doctest.h>

#include "protocols/dns/domain_route_table.h"

using namespace espvpn;
using namespace std::chrono_literals;
using Clock = DomainRouteTable::Clock;

namespace {

DnsAddress v4(std::uint8_t last, std::uint32_t ttl) {
    DnsAddress a;
    a.bytes[0] = 10;
    a.bytes[3] = last;
    a.ttl = ttl;
    return a;
}
DnsAddress v6(std::uint8_t last, std::uint32_t ttl) {
    DnsAddress a;
    a.v6 = true;
    a.bytes[0] = 0xfd;
    a.bytes[15] = last;
    a.ttl = ttl;
    return a;
}
std::string show(const std::vector<DomainRoute>& rs) {
    std::string s;
    for (const auto& r : rs) s += (s.empty() ? "" : " ") + std::string(r.include ? "+" : "-") + r.address.to_string();
    return s;
}

}  // namespace

TEST_CASE("domain routes: both families due at start, re-resolve at 80 % of the TTL, changed answer moves routes") {
    const Clock::time_point t0{};
    DomainRouteTable t({{"wiki.test", true}}, {30s, 3600s, 16}, t0);
    auto due = t.take_due(t0);
    REQUIRE(due.size() == 2);
    CHECK(due[0].type == DnsType::a);
    CHECK(due[1].type == DnsType::aaaa);
    CHECK(t.take_due(t0).empty());  // taken as sent

    auto c = t.on_answer(0, DnsType::a, {v4(1, 100), v4(2, 200)}, t0);
    CHECK(show(c.added) == "+10.0.0.1 +10.0.0.2");
    CHECK(c.removed.empty());
    c = t.on_answer(0, DnsType::aaaa, {v6(1, 50)}, t0);
    CHECK(show(c.added) == "+fd00::1");
    CHECK(t.stats().addresses == 3);
    CHECK(t.stats().resolves == 2);

    CHECK(t.take_due(t0 + 39s).empty());
    due = t.take_due(t0 + 40s);  // 0.8 x 50 s: AAAA
    REQUIRE(due.size() == 1);
    CHECK(due[0].type == DnsType::aaaa);
    CHECK(t.on_answer(0, DnsType::aaaa, {v6(1, 500)}, t0 + 40s).empty());  // same address: no change
    CHECK(t.take_due(t0 + 79s).empty());
    due = t.take_due(t0 + 80s);  // 0.8 x 100 s: A
    REQUIRE(due.size() == 1);
    c = t.on_answer(0, DnsType::a, {v4(2, 200), v4(3, 200)}, t0 + 80s);
    CHECK(show(c.removed) == "+10.0.0.1");
    CHECK(show(c.added) == "+10.0.0.3");
    CHECK(show(t.routes()) == "+10.0.0.2 +10.0.0.3 +fd00::1");
}

TEST_CASE("domain routes: TTLs clamped; failures back off, addresses expire without an answer") {
    const Clock::time_point t0{};
    DomainRouteTable t({{"a.test", false}}, {30s, 60s, 16}, t0);
    (void)t.take_due(t0);
    auto c = t.on_answer(0, DnsType::a, {v4(1, 1)}, t0);  // TTL 1 -> 30 s
    CHECK(show(c.added) == "-10.0.0.1");
    CHECK(t.next_due() == t0 + 5s);  // AAAA sent, no answer yet: asked again after min_ttl / 6
    t.on_answer(0, DnsType::aaaa, {}, t0);  // empty: asked again at 0.8 x min_ttl
    CHECK(t.next_due() == t0 + 24s);
    REQUIRE(t.take_due(t0 + 24s).size() == 2);
    t.on_failure(0, DnsType::a, t0 + 25s);
    CHECK(t.stats().failures == 1);
    CHECK(t.take_due(t0 + 29s).size() == 1);  // AAAA's retry after a missing answer (5 s)
    (void)t.on_answer(0, DnsType::aaaa, {}, t0 + 29s);
    CHECK(t.take_due(t0 + 29s).empty());
    CHECK(t.expire(t0 + 29s).empty());
    c = t.expire(t0 + 30s);
    CHECK(show(c.removed) == "-10.0.0.1");
    CHECK(t.routes().empty());
    // A's backoff: 5 s after the first failure, then 10, 20, 30 (capped at min_ttl).
    REQUIRE(t.take_due(t0 + 30s).size() == 1);
    t.on_failure(0, DnsType::a, t0 + 30s);
    CHECK(t.take_due(t0 + 39s).empty());
    REQUIRE(t.take_due(t0 + 40s).size() == 1);
    t.on_failure(0, DnsType::a, t0 + 40s);
    t.on_failure(0, DnsType::a, t0 + 40s);
    t.on_failure(0, DnsType::a, t0 + 40s);
    auto a_due = [&](Clock::time_point now) {
        std::size_t n = 0;
        for (const auto& d : t.take_due(now)) n += d.type == DnsType::a;
        return n;
    };
    CHECK(a_due(t0 + 69s) == 0);  // (AAAA's re-ask at 53 s is taken here too)
    CHECK(a_due(t0 + 70s) == 1);

    DomainRouteTable big({{"b.test", true}}, {30s, 60s, 16}, t0);
    (void)big.on_answer(0, DnsType::a, {v4(1, 100000)}, t0);  // 60 s at most
    CHECK(big.expire(t0 + 59s).empty());
    CHECK(big.expire(t0 + 60s).removed.size() == 1);
}

TEST_CASE("domain routes: exclude wins over include for the same address; the table is bounded") {
    const Clock::time_point t0{};
    DomainRouteTable t({{"in.test", true}, {"out.test", false}}, {30s, 3600s, 3}, t0);
    auto c = t.on_answer(0, DnsType::a, {v4(1, 100), v4(2, 100)}, t0);
    CHECK(show(c.added) == "+10.0.0.1 +10.0.0.2");
    c = t.on_answer(1, DnsType::a, {v4(2, 300)}, t0);
    CHECK(show(c.removed) == "+10.0.0.2");
    CHECK(show(c.added) == "-10.0.0.2");
    // A fourth entry evicts the one that expires first (10.0.0.1 or the include's .2, both at 100 s).
    c = t.on_answer(1, DnsType::aaaa, {v6(9, 1000)}, t0 + 1s);
    CHECK(t.stats().evicted == 1);
    CHECK(t.stats().addresses <= 3);
    CHECK(show(c.added).find("-fd00::9") != std::string::npos);
    // Out-of-range rules are ignored.
    CHECK(t.on_answer(7, DnsType::a, {v4(5, 100)}, t0).empty());
    t.on_failure(7, DnsType::a, t0);
    CHECK(t.stats().failures == 0);
    // Wrong family in an answer is ignored.
    CHECK(t.on_answer(0, DnsType::aaaa, {v4(5, 100)}, t0 + 2s).empty());
}
