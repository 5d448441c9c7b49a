// ReconnectPolicy: when to try reconnecting after the tunnel's transport was
// lost, and when to give up (openconnect's --reconnect-timeout: keep trying for
// that long). Sans-IO: the caller passes the time and reports each outcome.
//
// Attempts: the first one first_backoff after the loss; each failure doubles the wait, up to
// max_backoff (1, 2, 4, 8, 10, 10 s ...); never past the deadline, so the last one
// falls on it. expired() once the deadline passed and no attempt is still due.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace espvpn::session {

// Whole milliseconds of `d`, as the logs and the statistics give durations.
inline long long ms_of(std::chrono::steady_clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

class ReconnectPolicy {
public:
    using Clock = std::chrono::steady_clock;

    // Invariants: first_backoff > 0, max_backoff >= first_backoff, timeout >= 0 (clamped).
    ReconnectPolicy(Clock::time_point lost_at, std::chrono::seconds timeout,
                    Clock::duration first_backoff = std::chrono::seconds(1),
                    Clock::duration max_backoff = std::chrono::seconds(10));

    bool attempt_due(Clock::time_point now) const { return now >= next_attempt_; }
    // Called when an attempt starts; its number (1, 2, ...) is returned. Until it is
    // reported failed, no other attempt is due.
    unsigned begin_attempt();
    // The attempt failed at `now`: the next one after the current wait, which then doubles.
    void attempt_failed(Clock::time_point now);
    // The user asked (SIGUSR2): the next attempt now, the backoff unchanged.
    void attempt_now(Clock::time_point now) { next_attempt_ = now; }
    // Past the deadline and the attempt scheduled on it (if any) made: give up.
    // An attempt in flight past the deadline does not hold it off.
    bool expired(Clock::time_point now) const { return now > deadline_ && next_attempt_ > deadline_; }

    Clock::time_point lost_at() const { return lost_at_; }
    Clock::time_point deadline() const { return deadline_; }
    Clock::time_point next_attempt() const { return next_attempt_; }  // max() while one is in flight
    Clock::duration outage(Clock::time_point now) const { return now - lost_at_; }
    unsigned attempts() const { return attempts_; }

    // "2.5 s": how outages and waits are written in the log.
    static std::string seconds_text(Clock::duration d);

private:
    Clock::time_point lost_at_, deadline_, next_attempt_;
    Clock::duration backoff_, max_backoff_;
    unsigned attempts_ = 0;
};

// The outage bookkeeping both sessions share (AnyConnect's CSTP link, GP's
// transports): the first loss starts the outage (a ReconnectPolicy from then;
// the caller logs a WARN and queues `attempt-reconnect`), each later loss is a
// failed attempt. Sans-IO too: it returns the log lines, the caller writes them.
class Outage {
public:
    using Clock = ReconnectPolicy::Clock;

    // `peer`: what the connection went to, for messages ("the server", "the gateway").
    // `always_on` (--always-on): no deadline, the wait between attempts grows to kAlwaysOnMaxBackoff.
    Outage(std::string peer, std::chrono::seconds timeout, bool always_on = false)
        : peer_(std::move(peer)), timeout_(timeout), always_on_(always_on) {}
    static constexpr std::chrono::seconds kAlwaysOnMaxBackoff{60};

    struct Loss {
        bool started = false;  // the outage began now (else an attempt in it failed)
        std::string message;   // the log line (WARN when started, INFO otherwise)
    };
    // The transport, or an attempt during the outage, failed at `now` because of `why`.
    Loss lose(Clock::time_point now, const std::string& why);
    // Starts the due attempt: "reconnect attempt 2 (outage 3.0 s)" for the log.
    std::string begin_attempt(Clock::time_point now);
    // The give-up line once --reconnect-timeout is used up; nullopt while an attempt may still come.
    std::optional<std::string> given_up(Clock::time_point now) const;
    // Reconnected: the outage is over; its length is returned.
    Clock::duration end(Clock::time_point now);

    bool active() const { return policy_.has_value(); }
    // Only while active().
    ReconnectPolicy& policy() { return *policy_; }
    const std::string& last_error() const { return last_error_; }

private:
    std::string peer_;
    std::chrono::seconds timeout_;
    bool always_on_ = false;
    std::optional<ReconnectPolicy> policy_;
    std::string last_error_;
};

}  // namespace espvpn::session
