#include <doctest/doctest.h>

#include "protocols/dns/dns_message.h"

using namespace espvpn;
using Bytes = std::vector<std::uint8_t>;

namespace {

void put16(Bytes& b, unsigned v) {
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
}
void put32(Bytes& b, unsigned v) {
    put16(b, v >> 16);
    put16(b, v & 0xFFFF);
}

// A reply the way a server writes it: the query, flags changed, answers appended.
Bytes reply_to(const Bytes& query, unsigned flags, unsigned ancount) {
    Bytes r = query;
    r[2] = static_cast<std::uint8_t>(flags >> 8);
    r[3] = static_cast<std::uint8_t>(flags);
    r[6] = static_cast<std::uint8_t>(ancount >> 8);
    r[7] = static_cast<std::uint8_t>(ancount);
    return r;
}
// An answer record owned by the question's name (pointer to offset 12).
void answer(Bytes& r, unsigned type, unsigned ttl, const Bytes& rdata, unsigned owner_ptr = 12) {
    put16(r, 0xC000 | owner_ptr);
    put16(r, type);
    put16(r, 1);
    put32(r, ttl);
    put16(r, static_cast<unsigned>(rdata.size()));
    r.insert(r.end(), rdata.begin(), rdata.end());
}

}  // namespace

TEST_CASE("DNS query: header, labels, type, class") {
    auto q = build_dns_query(0x1234, "Wiki.Corp.test.", DnsType::aaaa);
    REQUIRE(q.ok());
    const Bytes want = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 4, 'W', 'i', 'k', 'i', 4, 'C', 'o', 'r', 'p',
                        4, 't', 'e', 's', 't', 0, 0, 28, 0, 1};
    CHECK(*q == want);
    CHECK_FALSE(build_dns_query(1, "", DnsType::a).ok());
    CHECK_FALSE(build_dns_query(1, "a..b", DnsType::a).ok());
    CHECK_FALSE(build_dns_query(1, ".a", DnsType::a).ok());
    CHECK_FALSE(build_dns_query(1, std::string(64, 'a') + ".test", DnsType::a).ok());
    CHECK(build_dns_query(1, std::string(63, 'a') + ".test", DnsType::a).ok());
    std::string long_name;
    while (long_name.size() < 254) long_name += "abcdefg.";
    CHECK_FALSE(build_dns_query(1, long_name.substr(0, 254), DnsType::a).ok());
}

TEST_CASE("DNS reply: A records with TTLs, case-insensitive question, duplicates folded") {
    const Bytes q = *build_dns_query(7, "wiki.corp.test", DnsType::a);
    Bytes r = reply_to(q, 0x8180, 3);
    r[13] = 'W';  // the server may echo the name in another case
    answer(r, 1, 60, {10, 0, 0, 1});
    answer(r, 1, 30, {10, 0, 0, 2});
    answer(r, 1, 90, {10, 0, 0, 1});
    auto p = parse_dns_reply(r, 7, "wiki.corp.test", DnsType::a);
    REQUIRE(p.ok());
    CHECK(p->rcode == 0);
    REQUIRE(p->addresses.size() == 2);
    CHECK(p->addresses[0].to_string() == "10.0.0.1");
    CHECK(p->addresses[0].ttl == 60);
    CHECK(p->addresses[1].to_string() == "10.0.0.2");
    CHECK(p->addresses[1].ttl == 30);
}

TEST_CASE("DNS reply: AAAA through a CNAME chain takes the smallest TTL; other owners ignored") {
    const Bytes q = *build_dns_query(9, "a.test", DnsType::aaaa);
    Bytes r = reply_to(q, 0x8180, 3);
    // a.test CNAME b.a.test (b + pointer to a.test at 12), TTL 20
    const std::size_t cname_at = r.size() + 12;  // where the CNAME's rdata starts
    answer(r, 5, 20, {1, 'b', 0xC0, 12});
    Bytes v6(16, 0);
    v6[0] = 0xfd;
    v6[15] = 5;
    answer(r, 28, 300, v6, static_cast<unsigned>(cname_at));  // owner b.a.test
    Bytes other = v6;
    other[15] = 6;
    answer(r, 28, 300, other);  // owned by a.test itself, which is a CNAME: not followed
    auto p = parse_dns_reply(r, 9, "a.test", DnsType::aaaa);
    REQUIRE(p.ok());
    REQUIRE(p->addresses.size() == 1);
    CHECK(p->addresses[0].v6);
    CHECK(p->addresses[0].to_string() == "fd00::5");
    CHECK(p->addresses[0].ttl == 20);
}

TEST_CASE("DNS reply: NXDOMAIN is an empty answer; errors for what cannot be used") {
    const Bytes q = *build_dns_query(5, "x.test", DnsType::a);
    auto nx = parse_dns_reply(reply_to(q, 0x8183, 0), 5, "x.test", DnsType::a);
    REQUIRE(nx.ok());
    CHECK(nx->rcode == 3);
    CHECK(nx->addresses.empty());
    CHECK_FALSE(parse_dns_reply(reply_to(q, 0x8182, 0), 5, "x.test", DnsType::a).ok());  // SERVFAIL
    CHECK_FALSE(parse_dns_reply(reply_to(q, 0x8380, 0), 5, "x.test", DnsType::a).ok());  // TC
    CHECK_FALSE(parse_dns_reply(reply_to(q, 0x0100, 0), 5, "x.test", DnsType::a).ok());  // a query
    CHECK_FALSE(parse_dns_reply(reply_to(q, 0x8180, 0), 6, "x.test", DnsType::a).ok());  // id
    CHECK_FALSE(parse_dns_reply(reply_to(q, 0x8180, 0), 5, "y.test", DnsType::a).ok());  // name
    CHECK_FALSE(parse_dns_reply(reply_to(q, 0x8180, 0), 5, "x.test", DnsType::aaaa).ok());  // type
    Bytes wrong_len = reply_to(q, 0x8180, 1);
    answer(wrong_len, 1, 60, {10, 0, 0});
    CHECK_FALSE(parse_dns_reply(wrong_len, 5, "x.test", DnsType::a).ok());
}

TEST_CASE("DNS reply, hostile: every truncation, pointer loops, forward pointers, CNAME loops") {
    const Bytes q = *build_dns_query(5, "x.test", DnsType::a);
    Bytes good = reply_to(q, 0x8180, 1);
    answer(good, 1, 60, {10, 0, 0, 1});
    REQUIRE(parse_dns_reply(good, 5, "x.test", DnsType::a).ok());
    for (std::size_t n = 0; n < good.size(); ++n) {
        const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK_FALSE(parse_dns_reply(cut, 5, "x.test", DnsType::a).ok());
    }
    // An owner that points at itself, and one that points forward.
    Bytes self = reply_to(q, 0x8180, 1);
    const auto at = static_cast<unsigned>(self.size());
    answer(self, 1, 60, {10, 0, 0, 1}, at);
    CHECK_FALSE(parse_dns_reply(self, 5, "x.test", DnsType::a).ok());
    Bytes fwd = reply_to(q, 0x8180, 1);
    answer(fwd, 1, 60, {10, 0, 0, 1}, at + 4);
    CHECK_FALSE(parse_dns_reply(fwd, 5, "x.test", DnsType::a).ok());
    // x.test CNAME x.test: a loop, bounded.
    Bytes loop = reply_to(q, 0x8180, 1);
    answer(loop, 5, 60, {0xC0, 12});
    CHECK_FALSE(parse_dns_reply(loop, 5, "x.test", DnsType::a).ok());
    // TTL with the top bit set counts as 0 (RFC 2181 §8).
    Bytes big = reply_to(q, 0x8180, 1);
    answer(big, 1, 0x80000000u, {10, 0, 0, 1});
    auto p = parse_dns_reply(big, 5, "x.test", DnsType::a);
    REQUIRE(p.ok());
    CHECK(p->addresses.at(0).ttl == 0);
}
