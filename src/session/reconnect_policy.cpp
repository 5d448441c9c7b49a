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

}  // namespace espvpn::session
