#include "src/session/path_rule.h"

#include <algorithm>
#include <utility>

namespace espvpn::session {

void PathRule::event(Clock::time_point now) {
    ++counters_.events;
    if (pending_) return;  // absorbed by the burst's check
    pending_ = true;
    check_at_ = now + s_.coalesce;
}

bool slept(std::chrono::milliseconds asked, std::chrono::milliseconds boot_elapsed) {
    return boot_elapsed > std::max(asked, std::chrono::milliseconds(0)) + std::chrono::milliseconds(3000);
}

void PathRule::resumed(Clock::time_point now, bool from_logind) {
    ++counters_.resumes;
    if (from_logind) ++counters_.sleep_signals;
    ++counters_.events;
    resume_ = true;
    pending_ = true;
    check_at_ = now;  // at once: a resume is not part of a burst to wait for
}

void PathRule::want_reconnect(std::string why) {
    if (reconnect_wanted_) return;  // one is due already; its reason stands
    reconnect_wanted_ = true;
    reconnect_why_ = std::move(why);
    probing_ = false;
}

PathRule::Decision PathRule::step(Clock::time_point now, const State& state, const std::function<std::string()>& lookup) {
    Decision d;
    if (probing_) {
        if (state.last_rx > probe_since_) {
            probing_ = false;
        } else if (state.in_outage) {
            probing_ = false;  // the link is gone anyway: the outage's attempts take over
        } else if (now >= probe_deadline_) {
            ++counters_.probe_failures;
            want_reconnect("no answer to the probe within " + std::to_string(probe_timeout_.count()) +
                           (probe_resume_ ? " ms after the resume" : " ms after the path changed"));
        }
    }
    if (pending_ && now >= check_at_) {
        pending_ = false;
        const bool resume = std::exchange(resume_, false);
        ++counters_.checks;
        const std::string local = lookup();
        const bool was_down = path_down_;
        path_down_ = local.empty();
        if (local.empty()) {
            // No route to the server: nothing to do until the next change brings one.
        } else if (local != known_ && !known_.empty()) {
            want_reconnect("the local address for the server changed (" + known_ + " -> " + local + ")");
            known_ = local;
        } else if (state.in_outage) {
            want_reconnect(resume ? "resumed from sleep during an outage (from " + local + ")"
                                  : std::string("a path to the server ") + (was_down ? "is back" : "changed") +
                                        " (from " + local + ")");
            known_ = local;
        } else if (state.can_probe && !reconnect_wanted_) {
            known_ = local;
            ++counters_.probes;
            probing_ = true;
            probe_resume_ = resume;
            probe_since_ = now;
            probe_timeout_ = resume ? s_.resume_probe_timeout : s_.probe_timeout;
            probe_deadline_ = now + probe_timeout_;
            d.action = Action::probe;
            return d;
        } else {
            known_ = local;
        }
    }
    if (reconnect_wanted_) {
        if (last_reconnect_ && now < *last_reconnect_ + s_.min_interval) {
            if (!deferred_noted_) ++counters_.deferred;
            deferred_noted_ = true;
            return d;  // its turn comes at next_due()
        }
        reconnect_wanted_ = false;
        deferred_noted_ = false;
        last_reconnect_ = now;
        ++counters_.reconnects;
        d.action = Action::reconnect;
        d.why = std::move(reconnect_why_);
    }
    return d;
}

std::optional<PathRule::Clock::time_point> PathRule::next_due() const {
    std::optional<Clock::time_point> t;
    auto earliest = [&t](Clock::time_point c) { t = t ? std::min(*t, c) : c; };
    if (pending_) earliest(check_at_);
    if (probing_) earliest(probe_deadline_);
    if (reconnect_wanted_) earliest(last_reconnect_ ? *last_reconnect_ + s_.min_interval : Clock::time_point::min());
    return t;
}

}  // namespace espvpn::session
