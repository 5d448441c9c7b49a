// The domain-based split tunnel (GP's <include-split-tunneling-domain> /
// <exclude-split-tunneling-domain>, issue 22 item 4), on the control thread: the
// plain names are resolved (A and AAAA) through the VPN's DNS servers, over one
// non-blocking UDP socket per server bound to the tun (the queries take the tunnel
// whatever the routes say); replies are matched to their queries (DnsQueries: id,
// server, question; 2 s timeout), kept with their TTLs in a DomainRouteTable
// (re-resolve, expiry, bounded), and its changes become host routes through the
// TunnelHost: an include's addresses via the tun, an exclude's the way the gateway
// is reached. Wildcard entries cannot be resolved by name and are not applied; an
// include's ":port" applies to the whole address, an exclude with a port is not
// applied (its other ports would leave outside the tunnel). The host configuration stays for the whole
// session (a reconnect keeps the tun, its routes and these), and every route added
// here goes when this object does. Nothing here touches the packet path.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protocols/dns/dns_queries.h"
#include "protocols/dns/domain_route_table.h"
#include "protocols/tunnel/tunnel_config.h"
#include "src/host/tunnel_host.h"
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

    // nullptr when the gateway sent no domain lists, or they cannot be applied here (the
    // reason logged: a vpnc-script sets the routes, --setuid, no DNS servers).
    static std::unique_ptr<DomainSplit> start(const TunnelConfig& config, host::TunnelHost& host,
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
    // "generation"};
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
    DomainSplit(std::vector<DomainRouteTable::Rule> rules, std::vector<int> ports, host::TunnelHost& host,
                std::vector<io::DnsSocket> servers, const DomainSplitOptions& options, Clock::time_point now);
    void handle(const DnsQueries::Outcome& o, Clock::time_point now);
    void apply(const DomainRouteChanges& changes);
    void send_due(Clock::time_point now);
    void publish();

    host::TunnelHost& host_;
    DomainRouteTable table_;
    DnsQueries queries_;
    std::vector<io::DnsSocket> servers_;
    std::size_t server_ = 0;      // where queries go now (the next one after a timeout)
    std::vector<int> ports_;      // per rule: the ":port" of the entry (0: none), for its line
    std::vector<RuleLog> logs_;
    bool stopped_ = false;
    unsigned generation_ = 0;
    mutable std::mutex json_mu_;  // json_, read by the stats reporter's thread
    std::string json_;
};

}  // namespace espvpn::session
