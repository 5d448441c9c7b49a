// DomainRouteTable: the domain-based split tunnel's state (GP's
// <include-split-tunneling-domain> / <exclude-split-tunneling-domain>, plain
// names), sans-IO on a clock the caller passes in. Each rule is a name that is
// resolved (A and AAAA) through the VPN's DNS servers; each address it gets
// becomes a host route, via the tun (include) or via the gateway's own path
// (exclude). The table says when each name is due for resolving and which
// routes to add or remove; the caller does the DNS I/O and the routes.
//   - an address lives for its TTL, clamped to [min_ttl, max_ttl];
//   - a name is re-resolved at 80 % of the smallest TTL among its addresses
//     (min_ttl for an empty answer), after a failure again with a backoff
//     (min_ttl/6 doubling, at most min_ttl), its addresses kept until expiry;
//   - an address missing from a new answer is removed at once;
//   - at most max_addresses addresses: the one that expires first is evicted
//     (counted); an address named by an include and an exclude is excluded;
//   - a wildcard rule ("*.name") is never due: its addresses are learnt from the
//     answers the DNS forwarder relays, added to the ones it has (learn()).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/dns/dns_message.h"

namespace espvpn {

struct DomainRouteLimits {
    std::chrono::seconds min_ttl{30};
    std::chrono::seconds max_ttl{3600};
    std::size_t max_addresses = 4096;
};

struct DomainRoute {
    DnsAddress address;  // ttl unused here
    bool include = true;  // via the tun; false: via the gateway's path
    bool operator==(const DomainRoute& o) const {
        return include == o.include && address.same_address(o.address);
    }
};

struct DomainRouteChanges {
    std::vector<DomainRoute> removed;  // remove these first
    std::vector<DomainRoute> added;
    bool empty() const { return removed.empty() && added.empty(); }
};

struct DomainRouteStats {
    std::size_t rules = 0;
    std::size_t addresses = 0;
    std::uint64_t resolves = 0;
    std::uint64_t failures = 0;
    std::uint64_t evicted = 0;
};

class DomainRouteTable {
public:
    using Clock = std::chrono::steady_clock;

    struct Rule {
        std::string name;  // a wildcard's without "*." ("" for a bare "*")
        bool include = true;
        bool wildcard = false;
    };
    // A query the caller should send: rule index and family.
    struct Due {
        std::size_t rule;
        DnsType type;
    };

    // Every rule is due at `now` for both families.
    DomainRouteTable(std::vector<Rule> rules, const DomainRouteLimits& limits, Clock::time_point now);

    const std::vector<Rule>& rules() const { return rules_; }

    // The queries due at `now`; each returned one is taken as sent (its
    // deadline moves to a retry after the failure backoff, in case neither
    // on_answer nor on_failure follows).
    std::vector<Due> take_due(Clock::time_point now);
    // Answer for (rule, type): the addresses and their TTLs.
    DomainRouteChanges on_answer(std::size_t rule, DnsType type, const std::vector<DnsAddress>& addresses,
                                 Clock::time_point now);
    // A relayed answer for a name under wildcard rule `rule`: its addresses added (or
    // their expiry pushed on), the rule's others kept until they expire.
    DomainRouteChanges learn(std::size_t rule, DnsType type, const std::vector<DnsAddress>& addresses,
                             Clock::time_point now);
    // No usable answer (timeout, error rcode, malformed): retry with a backoff.
    void on_failure(std::size_t rule, DnsType type, Clock::time_point now);
    // Addresses whose TTL ran out.
    DomainRouteChanges expire(Clock::time_point now);
    // When take_due() or expire() next has something to do.
    Clock::time_point next_due() const;

    // Every route now installed (what to remove at exit).
    std::vector<DomainRoute> routes() const;
    DomainRouteStats stats() const;

private:
    struct Query {
        Clock::time_point due;
        std::chrono::milliseconds backoff{0};
    };
    struct Entry {
        DnsAddress address;
        std::size_t rule;
        DnsType type;
        Clock::time_point expiry;
        bool include;
    };
    Query& query(std::size_t rule, DnsType type);
    void add(const Entry& e);  // evicts the entry expiring first when full
    std::chrono::seconds clamp(std::uint32_t ttl) const;

    std::vector<Rule> rules_;
    DomainRouteLimits limits_;
    std::vector<Query> queries_;  // 2 per rule: A, AAAA
    std::vector<Entry> entries_;
    std::uint64_t resolves_ = 0, failures_ = 0, evicted_ = 0;
};

// The wildcard rules ("*.base"), for the forwarder of session/domain_split: "*.base" covers the
// names below base (not base itself), a bare "*" (base "") every name.
bool wildcard_covers(std::string_view base, std::string_view name);
struct WildcardAnswer {
    std::size_t rule = 0;
    DnsType type = DnsType::a;
    std::vector<DnsAddress> addresses;
};
// The upstream reply (sent with `id`) to question `q`: the addresses to route when it answers an
// A/AAAA question under a wildcard rule (the longest base wins, an exclude on a tie); nullopt for anything else
// (other types, no wildcard, an error rcode, malformed), which is relayed as it is.
std::optional<WildcardAnswer> wildcard_answer(std::span<const std::uint8_t> reply, std::uint16_t id,
                                              const DnsQuestion& q, const std::vector<DomainRouteTable::Rule>& rules);

}  // namespace espvpn
