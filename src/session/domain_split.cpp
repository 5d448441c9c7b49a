#include "src/session/domain_split.h"

#include <sys/random.h>

#include <algorithm>
#include <array>

#include "src/log/logger.h"

namespace espvpn::session {

namespace {

constexpr int kMaxDatagramsPerStep = 64;  // per socket: a flood cannot hold the control loop
constexpr auto kForwardTimeout = std::chrono::seconds(2);  // then SERVFAIL (a stub waits 5 s)
constexpr std::size_t kMaxForwards = 256;                  // in flight; more: SERVFAIL at once

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

// The wildcard domains' forwarder on address:53 (the host opens it: the port needs a capability).
Result<io::DnsSocket> listener(host::Host& host, const std::string& address) {
    auto fd = host.open_dns_listener(address, 53, "");
    if (!fd) return fd.error();
    return io::DnsSocket::listening(std::move(*fd), io::endpoint_text(address, 53));
}

}  // namespace

std::unique_ptr<DomainSplit> DomainSplit::start(const TunnelConfig& c, host::Host& host,
                                                const DomainSplitOptions& options, Clock::time_point now) {
    if (c.split_include_domains.empty() && c.split_exclude_domains.empty()) return nullptr;
    std::vector<DomainRouteTable::Rule> rules;
    std::vector<int> ports;
    std::vector<std::string> wildcards;
    for (bool include : {true, false}) {
        for (const SplitDomain& d : include ? c.split_include_domains : c.split_exclude_domains) {
            // A full tunnel (no split route) carries an include wildcard's names already: no forwarder for it.
            if ((!d.wildcard && d.name.empty()) || (d.wildcard && include && c.split_include.empty())) continue;
            // A route cannot name a port. Through the tunnel, every port of the address is
            // only more than asked; around it, the other ports would leave outside the
            // tunnel: an exclude with a port stays in the tunnel (fails closed).
            if (d.port != 0 && !include) {
                LOG_WARN << "split domain " << d.to_string() << " (exclude) not applied: a route covers every port, "
                         << "so " << d.name << " stays in the tunnel";
                continue;
            }
            rules.push_back({d.name, include, d.wildcard});
            ports.push_back(d.port);
            if (d.wildcard) wildcards.push_back(d.to_string());
            if (d.port != 0)
                LOG_INFO << "split domain " << d.to_string() << ": the port is not applied; each address of "
                         << (d.wildcard ? "its names" : d.name) << " is routed via the tunnel for every port";
        }
    }
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
    for (const auto& r : rules)
        if (!r.wildcard) names.push_back((r.include ? "+" : "-") + r.name);
    std::vector<std::string> server_names;
    for (const io::DnsSocket& s : servers) server_names.push_back(s.server());
    if (!names.empty())
        LOG_INFO << "split domains: resolving " << joined(names) << " through " << joined(server_names) << " (via "
                 << tun << ")";
    std::unique_ptr<DomainSplit> split(
        new DomainSplit(std::move(rules), std::move(ports), host, std::move(servers), options, now));
    if (wildcards.empty()) return split;
    // Their names are known only when asked: the host asks the forwarder, which sees the answers.
    auto f = c.ip4_address.empty() ? Result<io::DnsSocket>(make_error("the tunnel has no IPv4 address"))
                                   : listener(host, c.ip4_address);
    Status pointed = f ? host.point_dns_at(c.ip4_address) : Status(f.error());
    if (!pointed) {
        LOG_WARN << "split domains " << joined(wildcards) << " not applied: " << pointed.error().message;
        if (f) (void)host.point_dns_at("");  // the VPN's servers again
        return split;
    }
    split->forwarder_.emplace(std::move(*f));
    split->forwarder_address_ = c.ip4_address;
    LOG_INFO << "split domains " << joined(wildcards) << ": the host's name server is now espvpn's forwarder on "
             << c.ip4_address << ":53, which asks the VPN's DNS and routes the addresses of an answer under them "
             << "before relaying it";
    return split;
}

DomainSplit::DomainSplit(std::vector<DomainRouteTable::Rule> rules, std::vector<int> ports, host::Host& host,
                         std::vector<io::DnsSocket> servers, const DomainSplitOptions& options, Clock::time_point now)
    : host_(host), table_(std::move(rules), options.limits, now), servers_(std::move(servers)),
      ports_(std::move(ports)), logs_(table_.rules().size()), generation_(options.generation) {
    publish();
}

void DomainSplit::stop() {
    if (stopped_) return;
    stopped_ = true;
    if (forwarder_) {
        forwarder_.reset();
        forwards_.clear();
        if (Status s = host_.point_dns_at(""); !s)
            LOG_WARN << "DNS: the VPN's servers not set again: " << s.error().message;
    }
    const std::size_t n = host_.domain_route_count();
    for (const DomainRoute& r : table_.routes())
        if (auto p = host_prefix(r.address)) host_.remove_domain_route(*p, r.include);
    if (n > 0) LOG_INFO << "split domains: " << n << " route(s) removed";
    publish();
}

std::vector<int> DomainSplit::fds() const {
    std::vector<int> out;
    for (const io::DnsSocket& s : servers_) out.push_back(s.fd());
    if (forwarder_) out.push_back(forwarder_->fd());
    return out;
}

DomainSplit::Clock::time_point DomainSplit::next_due() const {
    auto t = table_.next_due();
    if (auto d = queries_.next_deadline()) t = std::min(t, *d);
    for (const Forward& f : forwards_) t = std::min(t, f.deadline);
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
            const std::span<std::uint8_t> m{buf.data(), **got};
            const auto id = static_cast<std::uint16_t>(m.size() < 2 ? 0 : m[0] << 8 | m[1]);
            auto f = std::find_if(forwards_.begin(), forwards_.end(),
                                  [&](const Forward& x) { return x.id == id && x.server == i; });
            if (m.size() >= 2 && f != forwards_.end()) relay(f, m, now);
            else if (auto o = queries_.on_reply(i, m)) handle(*o, now);
        }
    }
    const auto late = queries_.take_timeouts(now);
    std::erase_if(forwards_, [&](const Forward& f) {
        if (f.deadline > now) return false;
        servfail(f);
        return true;
    });
    if (!late.empty() && servers_.size() > 1) server_ = (server_ + 1) % servers_.size();
    for (const DnsQueries::Outcome& o : late) handle(o, now);
    forward_queries(now);
    apply(table_.expire(now));
    send_due(now);
    publish();
}

void DomainSplit::send_due(Clock::time_point now) {
    for (const DomainRouteTable::Due& due : table_.take_due(now)) {
        if (queries_.in_flight(due.rule, due.type)) continue;  // its reply or timeout comes
        const std::uint16_t id = fresh_id();
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

std::uint16_t DomainSplit::fresh_id() const {
    std::uint16_t id = random_id();
    auto taken = [&] {
        return queries_.id_in_use(id) || std::ranges::any_of(forwards_, [&](const Forward& f) { return f.id == id; });
    };
    for (int i = 0; i < 8 && taken(); ++i) id = random_id();
    return id;
}

// The host's own queries (from the tun's address: nothing from the VPN's side), relayed upstream
// under an id of ours.
void DomainSplit::forward_queries(Clock::time_point now) {
    if (!forwarder_) return;
    std::array<std::uint8_t, 4096> buf;
    for (int n = 0; n < kMaxDatagramsPerStep; ++n) {
        io::SocketAddress from;
        auto got = forwarder_->receive(buf, &from);
        if (!got) {
            LOG_DEBUG << got.error().message;
            continue;
        }
        if (!*got) break;
        const std::span<std::uint8_t> m{buf.data(), **got};
        auto q = parse_dns_question(m);
        if (!q || !from.to_string().starts_with(forwarder_address_ + ":")) continue;
        Forward f{fresh_id(), server_, std::move(*q), from, now + kForwardTimeout};
        if (forwards_.size() >= kMaxForwards) {
            servfail(f);
            continue;
        }
        m[0] = static_cast<std::uint8_t>(f.id >> 8);
        m[1] = static_cast<std::uint8_t>(f.id);
        if (Status s = servers_[f.server].send(m); !s) LOG_DEBUG << s.error().message;  // it times out
        forwards_.push_back(std::move(f));
    }
}

// An upstream answer to a forwarded query: a wildcard's addresses routed first, so that the
// asker's first packet already takes the route, then the answer under the asker's id.
void DomainSplit::relay(std::vector<Forward>::iterator f, std::span<std::uint8_t> m, Clock::time_point now) {
    if (auto w = wildcard_answer(m, f->id, f->question, table_.rules()))
        apply(table_.learn(w->rule, w->type, w->addresses, now));
    m[0] = static_cast<std::uint8_t>(f->question.id >> 8);
    m[1] = static_cast<std::uint8_t>(f->question.id);
    if (Status s = forwarder_->send(m, &f->client); !s) LOG_DEBUG << s.error().message;
    ++forwarded_;
    forwards_.erase(f);
}

void DomainSplit::servfail(const Forward& f) {
    ++servfails_;
    LOG_DEBUG << "split domains: SERVFAIL for " << f.question.name << " (asked " << servers_[f.server].server() << ")";
    if (auto m = build_dns_servfail(f.question))
        if (Status s = forwarder_->send(*m, &f.client); !s) LOG_DEBUG << s.error().message;
}

void DomainSplit::handle(const DnsQueries::Outcome& o, Clock::time_point now) {
    const DomainRouteTable::Rule& rule = table_.rules()[o.rule];
    RuleLog& log = logs_[o.rule];
    const int f = o.type == DnsType::aaaa ? 1 : 0;
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
                    ", \"generation\": " + std::to_string(generation_) + ", \"forwarded\": " +
                    std::to_string(forwarded_) + ", \"servfails\": " + std::to_string(servfails_) + "}";
    std::lock_guard lock(json_mu_);
    json_ = std::move(j);
}

std::string DomainSplit::json() const {
    std::lock_guard lock(json_mu_);
    return json_;
}

}  // namespace espvpn::session
