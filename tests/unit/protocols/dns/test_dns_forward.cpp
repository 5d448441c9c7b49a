#include <doctest/doctest.h>

#include "protocols/dns/domain_route_table.h"

using namespace espvpn;
using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using Clock = DomainRouteTable::Clock;

namespace {

// A server's answer to `query`: the flags, then A records (TTL 60) owned by the question's name.
Bytes answer_to(const Bytes& query, unsigned flags, const std::vector<Bytes>& addresses) {
    Bytes r = query;
    r[2] = static_cast<std::uint8_t>(flags >> 8);
    r[3] = static_cast<std::uint8_t>(flags);
    r[7] = static_cast<std::uint8_t>(addresses.size());
    for (const Bytes& a : addresses) {
        const Bytes rr = {0xC0, 12, 0, static_cast<std::uint8_t>(a.size() == 4 ? 1 : 28), 0, 1, 0, 0, 0, 60,
                          0, static_cast<std::uint8_t>(a.size())};
        r.insert(r.end(), rr.begin(), rr.end());
        r.insert(r.end(), a.begin(), a.end());
    }
    return r;
}

DnsQuestion question(std::uint16_t id, std::string name, DnsType type) {
    return DnsQuestion{id, std::move(name), static_cast<std::uint16_t>(type), {}};
}

}  // namespace

TEST_CASE("DNS question: a stub's query of any type; replies, several questions, short input refused") {
    Bytes q = *build_dns_query(0xBEEF, "Host.Wild.Test", DnsType::a);
    auto p = parse_dns_question(q);
    REQUIRE(p.ok());
    CHECK(p->id == 0xBEEF);
    CHECK(p->name == "host.wild.test");
    CHECK(p->type == 1);
    q[q.size() - 3] = 15;  // MX: relayed, never looked into
    REQUIRE(parse_dns_question(q).ok());
    CHECK(parse_dns_question(q)->type == 15);
    Bytes reply = q;
    reply[2] |= 0x80;
    CHECK_FALSE(parse_dns_question(reply).ok());
    Bytes two = q;
    two[5] = 2;
    CHECK_FALSE(parse_dns_question(two).ok());
    Bytes chaos = q;
    chaos.back() = 3;  // class CH
    CHECK_FALSE(parse_dns_question(chaos).ok());
    CHECK_FALSE(parse_dns_question(Bytes(q.begin(), q.begin() + 14)).ok());
    CHECK_FALSE(parse_dns_question(Bytes{0, 1}).ok());
}

TEST_CASE("DNS SERVFAIL: the question's id and question byte for byte, QR RD-as-asked RA, rcode 2, no records") {
    // A stub that randomises the name's case (0x20) and sent an EDNS record: its question comes back as sent.
    Bytes query = *build_dns_query(0x1234, "LoSt.WiLd.TeSt", DnsType::aaaa);
    const Bytes opt = {0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
    query[11] = 1;  // ARCOUNT
    query.insert(query.end(), opt.begin(), opt.end());
    auto q = parse_dns_question(query);
    REQUIRE(q.ok());
    CHECK(q->name == "lost.wild.test");
    auto m = build_dns_servfail(*q);
    REQUIRE(m.ok());
    Bytes want(query.begin(), query.end() - static_cast<std::ptrdiff_t>(opt.size()));
    want[2] = 0x81;
    want[3] = 0x82;
    want[11] = 0;
    CHECK(*m == want);
    // What the client's resolver makes of it: an error rcode, the question its own.
    CHECK_FALSE(parse_dns_reply(*m, 0x1234, "lost.wild.test", DnsType::aaaa).ok());
    CHECK(parse_dns_question(*m).error().message.find("not a query") != std::string::npos);
    // RD clear in the query: clear in the answer.
    query[2] = 0;
    m = build_dns_servfail(*parse_dns_question(query));
    REQUIRE(m.ok());
    CHECK((*m)[2] == 0x80);
    CHECK_FALSE(build_dns_servfail(question(1, "x.test", DnsType::a)).ok());  // no wire bytes: refused
}

TEST_CASE("wildcard: the names below the base, not the base itself nor a lookalike; \"*\" every name") {
    CHECK(wildcard_covers("corp.test", "a.corp.test"));
    CHECK(wildcard_covers("corp.test", "x.y.corp.test"));
    CHECK_FALSE(wildcard_covers("corp.test", "corp.test"));
    CHECK_FALSE(wildcard_covers("corp.test", "evilcorp.test"));
    CHECK_FALSE(wildcard_covers("corp.test", ".corp.test"));
    CHECK_FALSE(wildcard_covers("corp.test", "corp.test.evil"));
    CHECK(wildcard_covers("", "anything.test"));
    CHECK_FALSE(wildcard_covers("", ""));
}

TEST_CASE("wildcard answer: the addresses of an A/AAAA answer under a wildcard rule, the longest base wins") {
    const std::vector<DomainRouteTable::Rule> rules = {
        {"a.corp.test", true, false}, {"corp.test", true, true}, {"pub.corp.test", false, true}};
    const Bytes q = *build_dns_query(77, "www.pub.corp.test", DnsType::a);
    const Bytes r = answer_to(q, 0x8180, {{10, 0, 0, 7}, {10, 0, 0, 8}});
    auto w = wildcard_answer(r, 77, question(5, "www.pub.corp.test", DnsType::a), rules);
    REQUIRE(w);
    CHECK(w->rule == 2);  // the exclude's "*.pub.corp.test", not "*.corp.test"
    CHECK(w->type == DnsType::a);
    REQUIRE(w->addresses.size() == 2);
    CHECK(w->addresses[1].to_string() == "10.0.0.8");
    CHECK(w->addresses[0].ttl == 60);

    const Bytes q2 = *build_dns_query(78, "b.corp.test", DnsType::a);
    auto w2 = wildcard_answer(answer_to(q2, 0x8180, {{10, 0, 0, 9}}), 78, question(1, "b.corp.test", DnsType::a), rules);
    REQUIRE(w2);
    CHECK(w2->rule == 1);
    // Relayed untouched: no wildcard covers it (a plain rule's name is resolved on its own), the
    // id is not the one it went with, an error rcode, no address.
    const Bytes q3 = *build_dns_query(79, "a.corp.test", DnsType::a);
    CHECK_FALSE(wildcard_answer(answer_to(q3, 0x8180, {{10, 0, 0, 1}}), 79, question(1, "a.corp.test", DnsType::a),
                                {rules[0]}));
    CHECK_FALSE(wildcard_answer(r, 78, question(5, "www.pub.corp.test", DnsType::a), rules));
    CHECK_FALSE(wildcard_answer(answer_to(q, 0x8182, {}), 77, question(5, "www.pub.corp.test", DnsType::a), rules));
    CHECK_FALSE(wildcard_answer(answer_to(q, 0x8180, {}), 77, question(5, "www.pub.corp.test", DnsType::a), rules));
    // Another type (MX) is not looked into.
    DnsQuestion mx = question(5, "www.pub.corp.test", DnsType::a);
    mx.type = 15;
    CHECK_FALSE(wildcard_answer(r, 77, mx, rules));
    // AAAA.
    const Bytes q6 = *build_dns_query(80, "v6.corp.test", DnsType::aaaa);
    Bytes a6(16, 0);
    a6[0] = 0xfd;
    a6[15] = 1;
    auto w6 = wildcard_answer(answer_to(q6, 0x8180, {a6}), 80, question(2, "v6.corp.test", DnsType::aaaa), rules);
    REQUIRE(w6);
    CHECK(w6->type == DnsType::aaaa);
    CHECK(w6->addresses[0].to_string() == "fd00::1");
    // The same base included and excluded: the exclude wins, in either order.
    for (bool exclude_first : {false, true}) {
        std::vector<DomainRouteTable::Rule> tie = {{"corp.test", true, true}, {"corp.test", false, true}};
        if (exclude_first) std::swap(tie[0], tie[1]);
        auto t = wildcard_answer(answer_to(q2, 0x8180, {{10, 0, 0, 9}}), 78, question(1, "b.corp.test", DnsType::a), tie);
        REQUIRE(t);
        CHECK_FALSE(tie[t->rule].include);
    }
}

TEST_CASE("domain routes: a wildcard rule is never due; learnt answers add up, refresh, expire; exclude wins") {
    const Clock::time_point t0{};
    DomainRouteTable t({{"plain.test", true, false}, {"corp.test", true, true}, {"pub.corp.test", false, true}},
                       {30s, 3600s, 16}, t0);
    CHECK(t.take_due(t0).size() == 2);  // the plain name's A and AAAA only
    DnsAddress a;
    a.bytes = {10, 0, 0, 7};
    a.ttl = 60;
    DnsAddress b = a;
    b.bytes[3] = 8;
    auto c = t.learn(1, DnsType::a, {a}, t0);
    REQUIRE(c.added.size() == 1);
    CHECK(c.added[0].include);
    c = t.learn(1, DnsType::a, {b}, t0 + 10s);  // another name under it: both kept
    CHECK(c.removed.empty());
    CHECK(c.added.size() == 1);
    CHECK(t.routes().size() == 2);
    CHECK(t.learn(1, DnsType::a, {a}, t0 + 50s).empty());  // asked again: a lives on to 110 s
    CHECK(t.learn(1, DnsType::aaaa, {a}, t0).empty());     // not of that family: ignored
    c = t.expire(t0 + 75s);
    REQUIRE(c.removed.size() == 1);
    CHECK(c.removed[0].address.to_string() == "10.0.0.8");
    c = t.learn(2, DnsType::a, {a}, t0 + 80s);  // the same address under the exclude: excluded
    REQUIRE(c.added.size() == 1);
    CHECK_FALSE(c.added[0].include);
    CHECK(t.expire(t0 + 111s).empty());  // the exclude's entry keeps it (to 140 s)
    CHECK(t.expire(t0 + 141s).removed.size() == 1);
    CHECK(t.stats().rules == 3);
    CHECK(t.stats().resolves == 5);
    CHECK(t.take_due(t0 + 141s).size() == 2);
}
