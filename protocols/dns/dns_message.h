// A/AAAA queries and answers (RFC 1035 §4, RFC 3596), sans-IO: the bytes of one
// UDP query out, the addresses and TTLs of one reply in. Only what the
// domain-based split tunnel needs: one question, recursion desired, CNAME chains
// followed inside the reply. Anything malformed is an Error, never a crash.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn {

enum class DnsType : std::uint16_t { a = 1, aaaa = 28 };

struct DnsAddress {
    bool v6 = false;
    std::array<std::uint8_t, 16> bytes{};  // the first 4 for IPv4
    std::uint32_t ttl = 0;                 // seconds, the smallest TTL along its CNAME chain

    bool same_address(const DnsAddress& o) const { return v6 == o.v6 && bytes == o.bytes; }
    std::string to_string() const;
};

struct DnsReply {
    std::uint8_t rcode = 0;  // 0 = NOERROR, 3 = NXDOMAIN (no addresses then)
    std::vector<DnsAddress> addresses;
};

// The query for `name` (a plain host name, no trailing dot needed). Error for an
// empty label, a label over 63 bytes or a name over 253 characters.
Result<std::vector<std::uint8_t>> build_dns_query(std::uint16_t id, std::string_view name, DnsType type);

// The reply to that query: the id, the question (name case-insensitively, type,
// class IN) must match. A truncated reply (TC) is an error (no TCP fallback),
// and so are SERVFAIL/REFUSED and other rcodes except NOERROR and NXDOMAIN.
Result<DnsReply> parse_dns_reply(std::span<const std::uint8_t> message, std::uint16_t id,
                                 std::string_view name, DnsType type);

// The question of a query a stub resolver sent (the wildcard domains' forwarder): any type.
struct DnsQuestion {
    std::uint16_t id = 0;
    std::string name;  // lower case, no trailing dot
    std::uint16_t type = 0;
    std::vector<std::uint8_t> wire;  // the header and question as sent (the name's case kept)
};
// Error unless it is a query (QR clear, opcode QUERY) with exactly one question of class IN.
Result<DnsQuestion> parse_dns_question(std::span<const std::uint8_t> message);
// The SERVFAIL answer to that question: its header (id, RD as asked) with QR and RA set, its
// question byte for byte (a stub that randomises the name's case checks it), no records.
Result<std::vector<std::uint8_t>> build_dns_servfail(const DnsQuestion& q);

}  // namespace espvpn
