#include "protocols/dns/domain_route_table.h"

#include <algorithm>
#include <map>

namespace espvpn {

namespace {

using Key = std::pair<bool, std::array<std::uint8_t, 16>>;

std::map<Key, DomainRoute> effective(const auto& entries) {
    std::map<Key, DomainRoute> out;
    for (const auto& e : entries) {
        auto [it, fresh] = out.try_emplace(Key{e.address.v6, e.address.bytes}, DomainRoute{e.address, e.include});
        if (!fresh && !e.include) it->second.include = false;  // exclude wins
    }
    for (auto& [k, r] : out) r.address.ttl = 0;
    return out;
}

DomainRouteChanges diff(const std::map<Key, DomainRoute>& before, const std::map<Key, DomainRoute>& after) {
    DomainRouteChanges c;
    for (const auto& [k, r] : before) {
        auto it = after.find(k);
        if (it == after.end() || !(it->second == r)) c.removed.push_back(r);
    }
    for (const auto& [k, r] : after) {
        auto it = before.find(k);
        if (it == before.end() || !(it->second == r)) c.added.push_back(r);
    }
    return c;
}

std::size_t slot(std::size_t rule, DnsType type) { return rule * 2 + (type == DnsType::aaaa ? 1 : 0); }

}  // namespace

DomainRouteTable::DomainRouteTable(std::vector<Rule> rules, const DomainRouteLimits& limits,
                                   Clock::time_point now)
    : rules_(std::move(rules)), limits_(limits), queries_(rules_.size() * 2, Query{now, {}}) {
    if (limits_.min_ttl < std::chrono::seconds(1)) limits_.min_ttl = std::chrono::seconds(1);
    if (limits_.max_ttl < limits_.min_ttl) limits_.max_ttl = limits_.min_ttl;
    for (std::size_t i = 0; i < queries_.size(); ++i)
        if (rules_[i / 2].wildcard) queries_[i].due = Clock::time_point::max();
}

void DomainRouteTable::add(const Entry& e) {
    if (entries_.size() >= limits_.max_addresses && !entries_.empty()) {
        entries_.erase(std::min_element(entries_.begin(), entries_.end(),
                                        [](const Entry& x, const Entry& y) { return x.expiry < y.expiry; }));
        ++evicted_;
    }
    if (entries_.size() < limits_.max_addresses) entries_.push_back(e);
}

DomainRouteTable::Query& DomainRouteTable::query(std::size_t rule, DnsType type) {
    return queries_.at(slot(rule, type));
}

std::chrono::seconds DomainRouteTable::clamp(std::uint32_t ttl) const {
    return std::clamp(std::chrono::seconds(ttl), limits_.min_ttl, limits_.max_ttl);
}

std::vector<DomainRouteTable::Due> DomainRouteTable::take_due(Clock::time_point now) {
    std::vector<Due> out;
    for (std::size_t i = 0; i < queries_.size(); ++i) {
        Query& q = queries_[i];
        if (q.due > now) continue;
        out.push_back(Due{i / 2, i % 2 ? DnsType::aaaa : DnsType::a});
        // If neither on_answer nor on_failure comes, try again later.
        const auto first = std::chrono::duration_cast<std::chrono::milliseconds>(limits_.min_ttl) / 6;
        q.due = now + std::max(q.backoff, first);
    }
    return out;
}

DomainRouteChanges DomainRouteTable::on_answer(std::size_t rule, DnsType type,
                                               const std::vector<DnsAddress>& addresses, Clock::time_point now) {
    if (rule >= rules_.size()) return {};
    const auto before = effective(entries_);
    ++resolves_;
    std::erase_if(entries_, [&](const Entry& e) { return e.rule == rule && e.type == type; });
    std::chrono::seconds shortest = limits_.min_ttl;
    bool any = false;
    for (const DnsAddress& a : addresses) {
        if (a.v6 != (type == DnsType::aaaa)) continue;
        const auto ttl = clamp(a.ttl);
        shortest = any ? std::min(shortest, ttl) : ttl;
        any = true;
        add(Entry{a, rule, type, now + ttl, rules_.at(rule).include});
    }
    Query& q = query(rule, type);
    q.backoff = {};
    q.due = now + std::chrono::duration_cast<std::chrono::milliseconds>(shortest) * 4 / 5;
    return diff(before, effective(entries_));
}

DomainRouteChanges DomainRouteTable::learn(std::size_t rule, DnsType type,
                                           const std::vector<DnsAddress>& addresses, Clock::time_point now) {
    if (rule >= rules_.size()) return {};
    const auto before = effective(entries_);
    ++resolves_;
    for (const DnsAddress& a : addresses) {
        if (a.v6 != (type == DnsType::aaaa)) continue;
        const auto expiry = now + clamp(a.ttl);
        auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Entry& e) { return e.rule == rule && e.address.same_address(a); });
        if (it != entries_.end()) it->expiry = std::max(it->expiry, expiry);
        else add(Entry{a, rule, type, expiry, rules_[rule].include});
    }
    return diff(before, effective(entries_));
}

void DomainRouteTable::on_failure(std::size_t rule, DnsType type, Clock::time_point now) {
    if (rule >= rules_.size()) return;
    ++failures_;
    Query& q = query(rule, type);
    const auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(limits_.min_ttl);
    q.backoff = q.backoff.count() == 0 ? cap / 6 : std::min(q.backoff * 2, cap);
    q.due = now + q.backoff;
}

DomainRouteChanges DomainRouteTable::expire(Clock::time_point now) {
    if (std::none_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.expiry <= now; }))
        return {};
    const auto before = effective(entries_);
    std::erase_if(entries_, [&](const Entry& e) { return e.expiry <= now; });
    return diff(before, effective(entries_));
}

DomainRouteTable::Clock::time_point DomainRouteTable::next_due() const {
    auto t = Clock::time_point::max();
    for (const Query& q : queries_) t = std::min(t, q.due);
    for (const Entry& e : entries_) t = std::min(t, e.expiry);
    return t;
}

std::vector<DomainRoute> DomainRouteTable::routes() const {
    std::vector<DomainRoute> out;
    for (auto& [k, r] : effective(entries_)) out.push_back(r);
    return out;
}

DomainRouteStats DomainRouteTable::stats() const {
    return DomainRouteStats{rules_.size(), effective(entries_).size(), resolves_, failures_, evicted_};
}

bool wildcard_covers(std::string_view base, std::string_view name) {
    if (base.empty()) return !name.empty();
    return name.size() > base.size() + 1 && name.ends_with(base) && name[name.size() - base.size() - 1] == '.';
}

std::optional<WildcardAnswer> wildcard_answer(std::span<const std::uint8_t> reply, std::uint16_t id,
                                              const DnsQuestion& q, const std::vector<DomainRouteTable::Rule>& rules) {
    if (q.type != static_cast<std::uint16_t>(DnsType::a) && q.type != static_cast<std::uint16_t>(DnsType::aaaa))
        return std::nullopt;
    std::optional<std::size_t> best;
    const auto beats = [&](std::size_t i) {  // longer base, or the same base excluded (an exclude wins a tie)
        const auto& r = rules[i];
        const auto& b = rules[*best];
        return r.name.size() > b.name.size() || (r.name.size() == b.name.size() && !r.include && b.include);
    };
    for (std::size_t i = 0; i < rules.size(); ++i)
        if (rules[i].wildcard && wildcard_covers(rules[i].name, q.name) && (!best || beats(i))) best = i;
    if (!best) return std::nullopt;
    const auto type = static_cast<DnsType>(q.type);
    auto parsed = parse_dns_reply(reply, id, q.name, type);
    if (!parsed || parsed->addresses.empty()) return std::nullopt;
    return WildcardAnswer{*best, type, std::move(parsed->addresses)};
}

}  // namespace espvpn
