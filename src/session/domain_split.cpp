#include "src/session/domain_split.h"

#include <sys/random.h>

#include <algorithm>
#include <array>

#include "src/log/logger.h"

namespace espvpn::session {

namespace {

constexpr int kMaxDatagramsPerStep = 64;  // per socket: a flood cannot hold the control loop

std::uint16_t random_id() {
    std::uint16_t id = 0;
    if (::getrandom(&id, sizeof id, 0) != sizeof id) {
        // getrandom does not fail for 2 bytes once the pool is ready; a fallback all the same.
        static std::uint16_t counter = 0x5a5a;
        id = static_cast<std::uint16_t>(counter * 40503u + 1);
        counter = id;
    }
    return id;
}

std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& s : items)
        if (!s.empty()) out += (out.empty() ? "" : ", ") + s;
    return out;
}

Result<IpPrefix> host_prefix(const DnsAddress& a) { return IpPrefix::parse(a.to_string()); }

int family_slot(DnsType t) { return t == DnsType::aaaa ? 1 : 0; }

}  // namespace

std::unique_ptr<DomainSplit> DomainSplit::start(const TunnelConfig& c, host::TunnelHost& host,
                                                const DomainSplitOptions& options, Clock::time_point now) {
    if (c.split_include_domains.empty() && c.split_exclude_domains.empty()) return nullptr;
    std::vector<DomainRouteTable::Rule> rules;
    std::vector<int> ports;
    std::vector<std::string> wildcards;
    for (bool include : {true, false}) {
        for (const SplitDomain& d : include ? c.split_include_domains : c.split_exclude_domains) {
            if (d.wildcard || d.name.empty()) {
                wildcards.push_back(d.to_string());
                continue;
            }
            // A route cannot name a port. Through the tunnel, every port of the address is
            // only more than asked; around it, the other ports would leave outside the
            // tunnel: an exclude with a port stays in the tunnel (fails closed).
            if (d.port != 0 && !include) {
                LOG_WARN << "split domain " << d.to_string() << " (exclude) not applied: a route covers every port, "
                         << "so " << d.name << " stays in the tunnel";
                continue;
            }
            rules.push_back({d.name, include});
            ports.push_back(d.port);
            if (d.port != 0)
                LOG_INFO << "split domain " << d.to_string() << ": the port is not applied; each address of "
                         << d.name << " is routed via the tunnel for every port";
        }
    }
    if (!wildcards.empty())
        LOG_WARN << "split domains " << joined(wildcards)
                 << " not applied: a wildcard entry cannot be resolved by name (its names are unknown until used)";
    if (rules.empty()) return nullptr;
    const std::string what = "split domains (" + std::to_string(rules.size()) + " names) not applied: ";
    if (!host.domain_routes_possible()) {
        LOG_WARN << what << "the routes are the vpnc-script's (--script)";
        return nullptr;
    }
    if (!options.keeps_privileges) {
        LOG_WARN << what << "--setuid drops the privileges their routes need after setup";
        return nullptr;
    }
    std::vector<io::DnsSocket> servers;
    const std::string tun = host.tun().name();
    for (const std::string& s : c.dns) {
        if (servers.size() == kMaxServers) break;
        const bool v6 = s.find(':') != std::string::npos;
        if (v6 && (options.disable_ipv6 || c.ip6_address.empty())) continue;
        if (!v6 && c.ip4_address.empty()) continue;
        auto sock = io::DnsSocket::open(s, 53, tun);
        if (!sock) {
            // Without SO_BINDTODEVICE (no CAP_NET_RAW) the routes decide; the VPN's servers are normally routed into it.
            LOG_WARN << sock.error().message << "; querying " << s << " by the routing table";
            sock = io::DnsSocket::open(s, 53, "");
        }
        if (!sock) {
            LOG_WARN << sock.error().message;
            continue;
        }
        servers.push_back(std::move(*sock));
    }
    if (servers.empty()) {
        LOG_WARN << what << "the gateway sent no DNS server the tunnel can reach";
        return nullptr;
    }
    std::vector<std::string> names;
    for (const auto& r : rules) names.push_back((r.include ? "+" : "-") + r.name);
    std::vector<std::string> server_names;
    for (const io::DnsSocket& s : servers) server_names.push_back(s.server());
    LOG_INFO << "split domains: resolving " << joined(names) << " through " << joined(server_names) << " (via "
             << tun << ")";
    return std::unique_ptr<DomainSplit>(
        new DomainSplit(std::move(rules), std::move(ports), host, std::move(servers), options, now));
}

DomainSplit::DomainSplit(std::vector<DomainRouteTable::Rule> rules, std::vector<int> ports, host::TunnelHost& host,
                         std::vector<io::DnsSocket> servers, const DomainSplitOptions& options, Clock::time_point now)
    : host_(host), table_(std::move(rules), options.limits, now), servers_(std::move(servers)),
      ports_(std::move(ports)), logs_(table_.rules().size()), generation_(options.generation) {
    publish();
}

void DomainSplit::stop() {
    if (stopped_) return;
    stopped_ = true;
    const std::size_t n = host_.domain_route_count();
    for (const DomainRoute& r : table_.routes())
        if (auto p = host_prefix(r.address)) host_.remove_domain_route(*p, r.include);
    if (n > 0) LOG_INFO << "split domains: " << n << " route(s) removed";
    publish();
}

std::vector<int> DomainSplit::fds() const {
    std::vector<int> out;
    for (const io::DnsSocket& s : servers_) out.push_back(s.fd());
    return out;
}

DomainSplit::Clock::time_point DomainSplit::next_due() const {
    auto t = table_.next_due();
    if (auto d = queries_.next_deadline()) t = std::min(t, *d);
    return t;
}

void DomainSplit::step(Clock::time_point now) {
    if (stopped_) return;
    std::array<std::uint8_t, 4096> buf;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        for (int n = 0; n < kMaxDatagramsPerStep; ++n) {
            auto got = servers_[i].receive(buf);
            if (!got) {
                LOG_DEBUG << got.error().message;  // ICMP: the query times out
                continue;
            }
            if (!*got) break;
            if (auto o = queries_.on_reply(i, {buf.data(), **got})) handle(*o, now);
        }
    }
    const auto late = queries_.take_timeouts(now);
    if (!late.empty() && servers_.size() > 1) server_ = (server_ + 1) % servers_.size();
    for (const DnsQueries::Outcome& o : late) handle(o, now);
    apply(table_.expire(now));
    send_due(now);
    publish();
}

void DomainSplit::send_due(Clock::time_point now) {
    for (const DomainRouteTable::Due& due : table_.take_due(now)) {
        if (queries_.in_flight(due.rule, due.type)) continue;  // its reply or timeout comes
        std::uint16_t id = random_id();
        for (int i = 0; i < 8 && queries_.id_in_use(id); ++i) id = random_id();
        const std::string& name = table_.rules()[due.rule].name;
        auto bytes = queries_.start(id, due.rule, due.type, name, server_, now);
        if (!bytes) {
            LOG_DEBUG << "split domain " << name << ": " << bytes.error().message;
            table_.on_failure(due.rule, due.type, now);
            continue;
        }
        // A failed send is a query that times out (counted once, as a failure).
        if (Status s = servers_[server_].send(*bytes); !s) LOG_DEBUG << s.error().message;
    }
}

void DomainSplit::handle(const DnsQueries::Outcome& o, Clock::time_point now) {
    const DomainRouteTable::Rule& rule = table_.rules()[o.rule];
    RuleLog& log = logs_[o.rule];
    const int f = family_slot(o.type);
    if (o.ok) {
        apply(table_.on_answer(o.rule, o.type, o.addresses, now));
        log.addresses[f].clear();
        for (const DnsAddress& a : o.addresses)
            if (a.v6 == (o.type == DnsType::aaaa)) log.addresses[f].push_back(a.to_string());
        log.error[f].clear();
    } else {
        table_.on_failure(o.rule, o.type, now);
        LOG_DEBUG << "split domain " << rule.name << " (" << (f ? "AAAA" : "A") << "): " << o.error;
        log.error[f] = o.error;
    }
    log.done[f] = true;
    if (log.logged || !log.done[0] || !log.done[1]) return;
    log.logged = true;
    std::vector<std::string> all = log.addresses[0];
    all.insert(all.end(), log.addresses[1].begin(), log.addresses[1].end());
    const std::string name =
        "split domain " + rule.name + (ports_[o.rule] ? ":" + std::to_string(ports_[o.rule]) : std::string());
    if (all.empty()) {
        std::string why = joined({log.error[0], log.error[1]});
        LOG_WARN << name << ": no address" << (log.error[0].empty() && log.error[1].empty() ? "" : " (" + why + ")")
                 << "; asking again later";
        return;
    }
    LOG_INFO << name << ": " << all.size() << (all.size() == 1 ? " address " : " addresses ")
             << (rule.include ? "via tun" : "outside the tunnel") << " (" << joined(all) << ")";
}

void DomainSplit::apply(const DomainRouteChanges& changes) {
    for (const DomainRoute& r : changes.removed) {
        auto p = host_prefix(r.address);
        if (!p) continue;
        host_.remove_domain_route(*p, r.include);
        LOG_INFO << "split domains: route " << p->to_string() << " removed (gone from the answers, or expired)";
    }
    for (const DomainRoute& r : changes.added) {
        auto p = host_prefix(r.address);
        if (!p) continue;
        auto done = host_.add_domain_route(*p, r.include);
        if (!done) LOG_WARN << "split domains: route " << p->to_string() << ": " << done.error().message;
        else LOG_INFO << "split domains: route " << p->to_string() << " " << *done;
    }
}

void DomainSplit::publish() {
    const DomainRouteStats s = table_.stats();
    std::string j = "{\"rules\": " + std::to_string(s.rules) + ", \"addresses\": " + std::to_string(s.addresses) +
                    ", \"routes\": " + std::to_string(host_.domain_route_count()) +
                    ", \"resolves\": " + std::to_string(s.resolves) + ", \"failures\": " + std::to_string(s.failures) +
                    ", \"evicted\": " + std::to_string(s.evicted) + ", \"stray\": " + std::to_string(queries_.stray()) +
                    ", \"generation\": " + std::to_string(generation_) + "}";
    std::lock_guard lock(json_mu_);
    json_ = std::move(j);
}

std::string DomainSplit::json() const {
    std::lock_guard lock(json_mu_);
    return json_;
}

}  // namespace espvpn::session
