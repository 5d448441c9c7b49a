#include "src/session/reconnect_policy.h"

#include <algorithm>
#include <cstdio>

namespace espvpn::session {

ReconnectPolicy::ReconnectPolicy(Clock::time_point lost_at, std::chrono::seconds timeout,
                                 Clock::duration first_backoff, Clock::duration max_backoff)
    : lost_at_(lost_at),
      deadline_(lost_at + std::max(timeout, std::chrono::seconds(0))),
      backoff_(std::max<Clock::duration>(first_backoff, std::chrono::milliseconds(1))),
      max_backoff_(std::max(max_backoff, backoff_)) {
    next_attempt_ = std::min(lost_at_ + backoff_, deadline_);
}

unsigned ReconnectPolicy::begin_attempt() {
    next_attempt_ = Clock::time_point::max();
    return ++attempts_;
}

void ReconnectPolicy::attempt_failed(Clock::time_point now) {
    backoff_ = std::min(backoff_ * 2, max_backoff_);
    // Past the deadline already: nothing more is scheduled (expired() then says so).
    next_attempt_ = now < deadline_ ? std::min(now + backoff_, deadline_) : Clock::time_point::max();
}

std::string ReconnectPolicy::seconds_text(Clock::duration d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
    return buf;
}

Outage::Loss Outage::lose(Clock::time_point now, const std::string& why) {
    last_error_ = why;
    const std::string timeout = std::to_string(timeout_.count());
    if (!policy_ && always_on_) {
        // No deadline (a century), 1, 2, 4 ... 60 s between attempts; a route change brings one forward.
        policy_.emplace(now, std::chrono::hours(24 * 365 * 100), std::chrono::seconds(1), kAlwaysOnMaxBackoff);
        return {true, "connection to " + peer_ + " lost: " + why + "; reconnecting until it is back (--always-on)"};
    }
    if (!policy_) {
        policy_.emplace(now, timeout_);
        return {true, "connection to " + peer_ + " lost: " + why + "; reconnecting for up to " + timeout +
                          " s (--reconnect-timeout)"};
    }
    policy_->attempt_failed(now);
    const std::string next = policy_->next_attempt() == Clock::time_point::max()
                                 ? "no more attempts (--reconnect-timeout " + timeout + ")"
                                 : "next in " + ReconnectPolicy::seconds_text(policy_->next_attempt() - now);
    return {false, "reconnect attempt " + std::to_string(policy_->attempts()) + " failed: " + why + "; " + next +
                       " (outage " + ReconnectPolicy::seconds_text(policy_->outage(now)) + ")"};
}

std::string Outage::begin_attempt(Clock::time_point now) {
    const unsigned n = policy_->begin_attempt();
    return "reconnect attempt " + std::to_string(n) + " (outage " + ReconnectPolicy::seconds_text(policy_->outage(now)) +
           ")";
}

std::optional<std::string> Outage::given_up(Clock::time_point now) const {
    if (!policy_ || !policy_->expired(now)) return std::nullopt;
    return "no connection to " + peer_ + " for " + ReconnectPolicy::seconds_text(policy_->outage(now)) +
           ", giving up (--reconnect-timeout " + std::to_string(timeout_.count()) + "); last error: " + last_error_;
}

Outage::Clock::duration Outage::end(Clock::time_point now) {
    const Clock::duration length = policy_ ? policy_->outage(now) : Clock::duration::zero();
    policy_.reset();
    last_error_.clear();
    return length;
}

}  // namespace espvpn::session
