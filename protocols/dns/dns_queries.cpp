#include "protocols/dns/dns_queries.h"

#include <algorithm>

namespace espvpn {

DnsQueries::DnsQueries(std::chrono::milliseconds timeout, std::size_t max_in_flight)
    : timeout_(timeout), max_(max_in_flight) {}

bool DnsQueries::in_flight(std::size_t rule, DnsType type) const {
    return std::any_of(pending_.begin(), pending_.end(),
                       [&](const Pending& p) { return p.rule == rule && p.type == type; });
}

bool DnsQueries::id_in_use(std::uint16_t id) const {
    return std::any_of(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.id == id; });
}

Result<std::vector<std::uint8_t>> DnsQueries::start(std::uint16_t id, std::size_t rule, DnsType type,
                                                    std::string_view name, std::size_t server, Clock::time_point now) {
    if (id_in_use(id)) return make_error("DNS: query id in use");
    if (in_flight(rule, type)) return make_error("DNS: a query for " + std::string(name) + " is in flight already");
    if (pending_.size() >= max_) return make_error("DNS: too many queries in flight");
    auto bytes = build_dns_query(id, name, type);
    if (!bytes) return bytes.error();
    pending_.push_back(Pending{id, rule, type, std::string(name), server, now + timeout_});
    return bytes;
}

std::optional<DnsQueries::Outcome> DnsQueries::on_reply(std::size_t server, std::span<const std::uint8_t> m) {
    if (m.size() < 2) {
        ++stray_;
        return std::nullopt;
    }
    const auto id = static_cast<std::uint16_t>(m[0] << 8 | m[1]);
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.id == id && p.server == server; });
    if (it == pending_.end()) {
        ++stray_;
        return std::nullopt;
    }
    Outcome o{it->rule, it->type, false, {}, {}};
    auto reply = parse_dns_reply(m, id, it->name, it->type);
    pending_.erase(it);
    if (!reply) {
        o.error = reply.error().message;
        return o;
    }
    o.ok = true;
    o.addresses = std::move(reply->addresses);
    return o;
}

std::vector<DnsQueries::Outcome> DnsQueries::take_timeouts(Clock::time_point now) {
    std::vector<Outcome> out;
    std::erase_if(pending_, [&](const Pending& p) {
        if (p.deadline > now) return false;
        out.push_back(Outcome{p.rule, p.type, false, {},
                              "no reply within " + std::to_string(timeout_.count()) + " ms"});
        return true;
    });
    return out;
}

std::optional<DnsQueries::Clock::time_point> DnsQueries::next_deadline() const {
    if (pending_.empty()) return std::nullopt;
    auto t = pending_.front().deadline;
    for (const Pending& p : pending_) t = std::min(t, p.deadline);
    return t;
}

}  // namespace espvpn
