// The domain-based split tunnel (GP's <include-split-tunneling-domain> /
// <exclude-split-tunneling-domain>, issue 22 item 4), on the control thread: the
// plain names are resolved (A and AAAA) through the VPN's DNS servers, over one
// non-blocking UDP socket per server bound to the tun (the queries take the tunnel
// whatever the routes say); replies are matched to their queries (DnsQueries: id,
// server, question; 2 s timeout), kept with their TTLs in a DomainRouteTable
// (re-resolve, expiry, bounded), and its changes become host routes through the
// TunnelHost: an include's addresses via the tun, an exclude's the way the gateway
// is reached. Wildcard entries ("*.name"): a DNS forwarder on the tun's IPv4 address,
// port 53, becomes the host's name server; it relays the host's queries to the VPN's
// servers (2 s, then SERVFAIL) and routes the addresses of an answer under a wildcard
// before relaying it. An include's ":port" applies to the whole address, an exclude
// with a port is not applied (its other ports would leave outside the tunnel). The
// host configuration stays for the whole session (a reconnect keeps the tun, its routes
// and these), and every route added here goes when this object does. Nothing here touches the packet path.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "protocols/dns/dns_queries.h"
#include "protocols/dns/domain_route_table.h"
#include "protocols/tunnel/tunnel_config.h"
#include "src/host/host.h"
#include "src/io/dns_socket.h"

namespace espvpn::session {

struct DomainSplitOptions {
    bool disable_ipv6 = false;
    bool keeps_privileges = true;  // false with --setuid: later routes could not be written
    DomainRouteLimits limits;
    unsigned generation = 0;  // how many times the lists changed on a reconnect (for --stats-json)
};

class DomainSplit {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::size_t kMaxServers = 3;  // DNS servers queried (one socket each)
    static constexpr std::size_t kMaxFds = kMaxServers + 1;  // and the forwarder's

    // nullptr when the gateway sent no domain lists, or they cannot be applied here (the
    // reason logged: a vpnc-script sets the routes, --setuid, no DNS servers).
    static std::unique_ptr<DomainSplit> start(const TunnelConfig& config, host::Host& host,
                                              const DomainSplitOptions& options, Clock::time_point now);
    ~DomainSplit() { stop(); }
    // Removes every route it added; nothing is resolved after it (the counters stay for the
    // last --stats-json write).
    void stop();
    DomainSplit(const DomainSplit&) = delete;
    DomainSplit& operator=(const DomainSplit&) = delete;

    // The sockets to poll for readability.
    std::vector<int> fds() const;
    // Replies read, timeouts and expiries handled, due queries sent, routes changed.
    void step(Clock::time_point now);
    // When step() next has something to do (besides a readable socket).
    Clock::time_point next_due() const;
    // For --stats-json: {"rules", "addresses", "routes", "resolves", "failures", "evicted", "stray",
    // "generation", "forwarded", "servfails"};
    // any thread.
    std::string json() const;

private:
    // What each rule's first answers gave, for its one summary line.
    struct RuleLog {
        bool done[2] = {false, false};
        std::vector<std::string> addresses[2];
        std::string error[2];
        bool logged = false;
    };
    // A query relayed by the forwarder: the id it went upstream with, and who asked.
    struct Forward {
        std::uint16_t id;
        std::size_t server;
        DnsQuestion question;
        io::SocketAddress client;
        Clock::time_point deadline;
    };
    DomainSplit(std::vector<DomainRouteTable::Rule> rules, std::vector<int> ports, host::Host& host,
                std::vector<io::DnsSocket> servers, const DomainSplitOptions& options, Clock::time_point now);
    void forward_queries(Clock::time_point now);
    void relay(std::vector<Forward>::iterator f, std::span<std::uint8_t> reply, Clock::time_point now);
    void servfail(const Forward& f);
    std::uint16_t fresh_id() const;
    void handle(const DnsQueries::Outcome& o, Clock::time_point now);
    void apply(const DomainRouteChanges& changes);
    void send_due(Clock::time_point now);
    void publish();

    host::Host& host_;
    DomainRouteTable table_;
    DnsQueries queries_;
    std::vector<io::DnsSocket> servers_;
    std::size_t server_ = 0;      // where queries go now (the next one after a timeout)
    std::vector<int> ports_;      // per rule: the ":port" of the entry (0: none), for its line
    std::vector<RuleLog> logs_;
    std::optional<io::DnsSocket> forwarder_;  // with wildcard rules
    std::string forwarder_address_;           // the tun's IPv4 address, where it listens
    std::vector<Forward> forwards_;
    std::uint64_t forwarded_ = 0, servfails_ = 0;
    bool stopped_ = false;
    unsigned generation_ = 0;
    mutable std::mutex json_mu_;  // json_, read by the stats reporter's thread
    std::string json_;
};

}  // namespace espvpn::session
