#include "protocols/dns/dns_message.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>

#include "protocols/base/ascii.h"

namespace espvpn {

namespace {

constexpr std::uint16_t kClassIn = 1;
constexpr std::uint16_t kTypeCname = 5;
constexpr std::size_t kHeader = 12;
constexpr std::size_t kMaxName = 253;  // text form, without the trailing dot
constexpr int kMaxChain = 8;           // CNAME hops followed inside one reply

class Reader {
public:
    explicit Reader(std::span<const std::uint8_t> m) : m_(m) {}
    bool u16(std::size_t& pos, std::uint16_t& v) const {
        if (pos + 2 > m_.size()) return false;
        v = static_cast<std::uint16_t>(m_[pos] << 8 | m_[pos + 1]);
        pos += 2;
        return true;
    }
    bool u32(std::size_t& pos, std::uint32_t& v) const {
        std::uint16_t hi = 0, lo = 0;
        if (!u16(pos, hi) || !u16(pos, lo)) return false;
        v = static_cast<std::uint32_t>(hi) << 16 | lo;
        return true;
    }
    // A possibly compressed name at `pos` (advanced past it), in lower case
    // with dots. Pointers must point backwards, so a loop cannot form.
    bool name(std::size_t& pos, std::string& out) const {
        out.clear();
        std::size_t p = pos;
        bool jumped = false;
        std::size_t limit = p;  // a pointer must land before this
        for (int labels = 0; labels < 128; ++labels) {
            if (p >= m_.size()) return false;
            const std::uint8_t len = m_[p];
            if ((len & 0xC0) == 0xC0) {
                if (p + 1 >= m_.size()) return false;
                const std::size_t target = static_cast<std::size_t>(len & 0x3F) << 8 | m_[p + 1];
                if (target >= limit) return false;
                if (!jumped) pos = p + 2;
                jumped = true;
                limit = target;
                p = target;
                continue;
            }
            if ((len & 0xC0) != 0) return false;  // 0x40/0x80: obsolete label types
            if (len == 0) {
                if (!jumped) pos = p + 1;
                return true;
            }
            if (p + 1 + len > m_.size()) return false;
            if (!out.empty()) out += '.';
            out += ascii_lower(std::string_view(reinterpret_cast<const char*>(&m_[p + 1]), len));
            if (out.size() > kMaxName) return false;
            p += 1 + len;
        }
        return false;
    }

private:
    std::span<const std::uint8_t> m_;
};

struct Record {
    std::string owner;
    std::uint16_t type = 0;
    std::uint32_t ttl = 0;
    std::size_t rdata = 0;  // offset in the message
    std::uint16_t rdlength = 0;
};

}  // namespace

std::string DnsAddress::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
    return buf;
}

Result<std::vector<std::uint8_t>> build_dns_query(std::uint16_t id, std::string_view name, DnsType type) {
    if (!name.empty() && name.back() == '.') name.remove_suffix(1);
    if (name.empty() || name.size() > kMaxName) return make_error("DNS: bad name length");
    std::vector<std::uint8_t> q = {static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id),
                                   0x01, 0x00,  // RD
                                   0, 1, 0, 0, 0, 0, 0, 0};
    std::size_t start = 0;
    while (start <= name.size()) {
        std::size_t dot = name.find('.', start);
        if (dot == std::string_view::npos) dot = name.size();
        const std::size_t len = dot - start;
        if (len == 0 || len > 63) return make_error("DNS: bad label in \"" + std::string(name) + "\"");
        q.push_back(static_cast<std::uint8_t>(len));
        q.insert(q.end(), name.begin() + static_cast<std::ptrdiff_t>(start),
                 name.begin() + static_cast<std::ptrdiff_t>(dot));
        start = dot + 1;
    }
    q.push_back(0);
    const auto t = static_cast<std::uint16_t>(type);
    q.insert(q.end(), {static_cast<std::uint8_t>(t >> 8), static_cast<std::uint8_t>(t), 0, kClassIn});
    return q;
}

Result<DnsReply> parse_dns_reply(std::span<const std::uint8_t> m, std::uint16_t id, std::string_view name,
                                 DnsType type) {
    if (!name.empty() && name.back() == '.') name.remove_suffix(1);
    const Reader r(m);
    std::size_t pos = 0;
    std::uint16_t got_id = 0, flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
    if (!r.u16(pos, got_id) || !r.u16(pos, flags) || !r.u16(pos, qd) || !r.u16(pos, an) || !r.u16(pos, ns) ||
        !r.u16(pos, ar))
        return make_error("DNS: reply shorter than its header");
    if (got_id != id) return make_error("DNS: reply id does not match the query");
    if (!(flags & 0x8000)) return make_error("DNS: not a reply");
    if (flags & 0x0200) return make_error("DNS: truncated reply");
    const std::uint8_t rcode = flags & 0x0F;
    if (rcode != 0 && rcode != 3) return make_error("DNS: server answered rcode " + std::to_string(rcode));
    if (qd != 1) return make_error("DNS: reply does not carry exactly one question");
    std::string qname;
    std::uint16_t qtype = 0, qclass = 0;
    if (!r.name(pos, qname) || !r.u16(pos, qtype) || !r.u16(pos, qclass))
        return make_error("DNS: malformed question");
    if (qname != ascii_lower(name) || qtype != static_cast<std::uint16_t>(type) || qclass != kClassIn)
        return make_error("DNS: reply is for another question");

    std::vector<Record> records;
    for (std::uint16_t i = 0; i < an; ++i) {
        Record rec;
        std::uint16_t cls = 0;
        if (!r.name(pos, rec.owner) || !r.u16(pos, rec.type) || !r.u16(pos, cls) || !r.u32(pos, rec.ttl) ||
            !r.u16(pos, rec.rdlength) || pos + rec.rdlength > m.size())
            return make_error("DNS: malformed answer record");
        rec.rdata = pos;
        pos += rec.rdlength;
        if (rec.ttl > 0x7FFFFFFF) rec.ttl = 0;  // RFC 2181 §8
        if (cls == kClassIn) records.push_back(std::move(rec));
    }

    DnsReply reply;
    reply.rcode = rcode;
    if (rcode != 0) return reply;
    // Follow the CNAME chain from the question's name.
    std::string owner = qname;
    std::uint32_t chain_ttl = 0xFFFFFFFF;
    for (int hop = 0; hop <= kMaxChain; ++hop) {
        const auto cname = std::find_if(records.begin(), records.end(), [&](const Record& rec) {
            return rec.type == kTypeCname && rec.owner == owner;
        });
        if (cname == records.end()) break;
        if (hop == kMaxChain) return make_error("DNS: CNAME chain too long");
        std::size_t p = cname->rdata;
        std::string target;
        if (!r.name(p, target) || p != cname->rdata + cname->rdlength)
            return make_error("DNS: malformed CNAME");
        chain_ttl = std::min(chain_ttl, cname->ttl);
        owner = target;
    }
    const std::size_t want = type == DnsType::a ? 4 : 16;
    for (const Record& rec : records) {
        if (rec.type != static_cast<std::uint16_t>(type) || rec.owner != owner) continue;
        if (rec.rdlength != want) return make_error("DNS: address record of the wrong length");
        DnsAddress a;
        a.v6 = type == DnsType::aaaa;
        std::copy_n(m.begin() + static_cast<std::ptrdiff_t>(rec.rdata), want, a.bytes.begin());
        a.ttl = std::min(rec.ttl, chain_ttl);
        if (std::none_of(reply.addresses.begin(), reply.addresses.end(),
                         [&](const DnsAddress& x) { return x.same_address(a); }))
            reply.addresses.push_back(a);
    }
    return reply;
}

Result<DnsQuestion> parse_dns_question(std::span<const std::uint8_t> m) {
    const Reader r(m);
    std::size_t pos = 0;
    std::uint16_t flags = 0, qd = 0, qclass = 0;
    DnsQuestion q;
    if (!r.u16(pos, q.id) || !r.u16(pos, flags) || !r.u16(pos, qd))
        return make_error("DNS: query shorter than its header");
    if ((flags & 0xF800) != 0 || qd != 1) return make_error("DNS: not a query with one question");
    pos = kHeader;
    if (!r.name(pos, q.name) || !r.u16(pos, q.type) || !r.u16(pos, qclass) || qclass != kClassIn)
        return make_error("DNS: malformed question");
    q.wire.assign(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(pos));
    return q;
}

Result<std::vector<std::uint8_t>> build_dns_servfail(const DnsQuestion& q) {
    if (q.wire.size() <= kHeader) return make_error("DNS: no question to answer");
    std::vector<std::uint8_t> m = q.wire;
    m[0] = static_cast<std::uint8_t>(q.id >> 8);
    m[1] = static_cast<std::uint8_t>(q.id);
    m[2] = static_cast<std::uint8_t>(0x80 | (m[2] & 0x01));  // QR, opcode QUERY, RD as asked
    m[3] = 0x82;                                              // RA, rcode 2
    std::fill(m.begin() + 6, m.begin() + kHeader, 0);         // no answer/authority/additional records
    return m;
}

}  // namespace espvpn
