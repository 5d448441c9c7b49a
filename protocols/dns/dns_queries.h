// The A/AAAA queries in flight for the domain-based split tunnel, sans-IO: each
// has an id (random, the caller's), the server it was sent to and a deadline. A
// datagram is taken only for the query with its id that went to that server, and
// then only when it answers that query's question (parse_dns_reply); anything
// else (an unknown id, another server's, a late reply) is ignored and counted as
// stray. A query past its deadline is a failure.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/dns/dns_message.h"

namespace espvpn {

class DnsQueries {
public:
    using Clock = std::chrono::steady_clock;

    // What became of one query: an answer (ok, its addresses; NXDOMAIN has none) or a
    // failure (`error`: timed out, SERVFAIL, malformed).
    struct Outcome {
        std::size_t rule = 0;
        DnsType type = DnsType::a;
        bool ok = false;
        std::vector<DnsAddress> addresses;
        std::string error;
    };

    explicit DnsQueries(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000),
                        std::size_t max_in_flight = 64);

    bool in_flight(std::size_t rule, DnsType type) const;
    bool id_in_use(std::uint16_t id) const;
    // The bytes of the query for `name` to send to server number `server`, recorded as in
    // flight until `now` + the timeout. An Error (nothing recorded) for a bad name, an id in
    // use, a (rule, type) already in flight, or max_in_flight reached.
    Result<std::vector<std::uint8_t>> start(std::uint16_t id, std::size_t rule, DnsType type, std::string_view name,
                                            std::size_t server, Clock::time_point now);
    // A datagram from server number `server`: the outcome of the query it answers, or
    // nullopt when it answers none of ours (stray).
    std::optional<Outcome> on_reply(std::size_t server, std::span<const std::uint8_t> datagram);
    // The queries whose deadline has passed, as failures (no longer in flight).
    std::vector<Outcome> take_timeouts(Clock::time_point now);
    // The earliest deadline, nullopt when nothing is in flight.
    std::optional<Clock::time_point> next_deadline() const;

    std::size_t size() const { return pending_.size(); }
    std::uint64_t stray() const { return stray_; }

private:
    struct Pending {
        std::uint16_t id;
        std::size_t rule;
        DnsType type;
        std::string name;
        std::size_t server;
        Clock::time_point deadline;
    };
    std::chrono::milliseconds timeout_;
    std::size_t max_;
    std::vector<Pending> pending_;
    std::uint64_t stray_ = 0;
};

}  // namespace espvpn
