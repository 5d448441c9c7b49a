#include "src/session/session_control.h"

#include <signal.h>

#include <utility>

namespace espvpn::session {

using log::Level;
using host::ScriptReason;

const char* describe(TunnelEnd end) {
    switch (end) {
        case TunnelEnd::user_logout: return "logged out";
        case TunnelEnd::user_detach: return "detached (session kept)";
        case TunnelEnd::server_disconnect: return "session terminated by the server";
        case TunnelEnd::connection_lost: return "the connection to the server was lost";
        case TunnelEnd::reconnect_timed_out: return "no connection came back within --reconnect-timeout";
        case TunnelEnd::cookie_rejected: return "cookie rejected";
        case TunnelEnd::captive_portal: return "a captive portal stands before the gateway";
        case TunnelEnd::error: return "the tunnel ended on the error above";  // "error: error; exiting" said nothing
    }
    return "?";
}

SessionControl::SessionControl(std::string peer, std::chrono::seconds reconnect_timeout, std::string attempt_text,
                               bool always_on)
    : outage_(std::move(peer), reconnect_timeout, always_on), attempt_text_(std::move(attempt_text)) {}

void SessionControl::begin(SessionActions& a, AttemptPurpose purpose, std::string why, Clock::time_point now) {
    attempt_ = Attempt{purpose, now};
    attempt_why_ = std::move(why);
    a.start_attempt = purpose;
}

SessionActions SessionControl::signal(int sig, Clock::time_point now, std::string_view renew_blocked) {
    SessionActions a;
    if (sig == SIGHUP) {
        a.end = TunnelEnd::user_detach;
    } else if (sig == SIGINT || sig == SIGTERM) {
        a.end = TunnelEnd::user_logout;
    } else if (sig == SIGUSR2) {
        if (outage_.active() && !attempt_) {
            a.add(Level::info, "SIGUSR2: next reconnect attempt now");
            outage_.policy().attempt_now(now);
        } else if (attempt_) {
            a.add(Level::info, "SIGUSR2: a new connection is being made (" + attempt_why_ + "); ignored");
        } else if (!renew_blocked.empty()) {
            a.add(Level::info, "SIGUSR2: " + std::string(renew_blocked) + "; ignored");
        } else {
            // As openconnect: attempt-reconnect, a new link with the same session, `reconnect` once it carries.
            return renew(AttemptPurpose::renew, "SIGUSR2", true);
        }
    }
    return a;
}

SessionActions SessionControl::renew(AttemptPurpose purpose, const std::string& why, bool scripts) {
    SessionActions a;
    if (attempt_ || (outage_.active() && purpose != AttemptPurpose::fallback)) return a;
    if (purpose == AttemptPurpose::renew)
        a.add(Level::info, why + ": reconnecting with the same session; the current link carries data meanwhile");
    if (scripts) {
        a.scripts.push_back(ScriptReason::attempt_reconnect);
        renewing_ = true;
    }
    begin(a, purpose, why, Clock::time_point{});  // its age counts from a loss that makes it the outage's
    return a;
}

SessionActions SessionControl::link_up(Clock::time_point now, const std::string& detail, const std::string& suffix) {
    SessionActions a;
    awaiting_up_ = false;
    if (outage_.active()) {
        const unsigned attempts = outage_.policy().attempts();
        const auto length = outage_.end(now);
        a.add(Level::info, "reconnected " + detail + " after " + std::to_string(attempts) + " attempt(s); outage " +
                               std::to_string(ms_of(length)) + " ms" + suffix);
        a.outage_ended = length;
        renewing_ = true;
    }
    if (renewing_) a.scripts.push_back(ScriptReason::reconnect);
    renewing_ = false;
    if (!ever_up_) a.first_up = true;
    ever_up_ = true;
    return a;
}

SessionActions SessionControl::link_lost(Clock::time_point now, const std::string& why) {
    SessionActions a;
    a.drop_link = true;
    awaiting_up_ = false;
    const Outage::Loss loss = outage_.lose(now, why);
    if (!loss.started) {
        a.add(Level::info, loss.message);
        return a;
    }
    a.add(Level::warn, loss.message);
    a.scripts.push_back(ScriptReason::attempt_reconnect);
    if (attempt_) {
        // A new link is being made already (SIGUSR2, rekey): it counts as the outage's first attempt.
        a.add(Level::info, outage_.begin_attempt(now) + ": the new connection begun for \"" + attempt_why_ +
                               "\" is still being made");
        attempt_->purpose = AttemptPurpose::reconnect;
        attempt_->began = now;
    }
    return a;
}

SessionActions SessionControl::link_ended(TunnelEnd end, const std::string& why) {
    SessionActions a;
    a.add(end == TunnelEnd::error ? Level::error : Level::info, why);
    a.end = end;
    return a;
}

SessionActions SessionControl::attempt_finished(Clock::time_point now, const AttemptResult& r) {
    SessionActions a;
    if (!attempt_) return a;
    const AttemptPurpose purpose = attempt_->purpose;
    attempt_.reset();
    const bool retry_now = std::exchange(retry_now_, false);
    switch (r.kind) {
        case AttemptResult::Kind::cookie_rejected:
            a.add(Level::error, attempt_why_ + ": " + r.why);
            a.end = TunnelEnd::cookie_rejected;
            return a;
        case AttemptResult::Kind::fatal:
            a.add(Level::error, r.why);
            a.end = r.end;
            return a;
        case AttemptResult::Kind::failed:
            if (purpose == AttemptPurpose::reconnect) {
                const Outage::Loss loss = outage_.lose(now, r.why);
                a.add(Level::info, loss.message);
                if (retry_now && outage_.active()) outage_.policy().attempt_now(now);
            } else if (purpose == AttemptPurpose::fallback) {
                return link_lost(now, r.why);
            } else if (purpose == AttemptPurpose::rekey) {
                a.add(Level::warn, attempt_why_ + ": " + r.why + r.note);
            } else if (!r.old_link_down) {
                // Make-before-break: the old link works, so it stays.
                a.add(Level::warn, attempt_why_ + ": no new connection (" + r.why + "); the current one carries on" + r.note);
                renewing_ = false;
            } else {
                a.add(Level::warn, attempt_why_ + ": no new connection (" + r.why + ")");
            }
            return a;
        case AttemptResult::Kind::opened: break;
    }
    if (!r.up) {
        awaiting_up_ = true;
        return a;
    }
    if (purpose == AttemptPurpose::reconnect || purpose == AttemptPurpose::fallback) return link_up(now, r.detail, r.note);
    if (purpose == AttemptPurpose::renew) {
        if (!r.detail.empty()) a.add(Level::info, "reconnected " + r.detail);
        SessionActions up = link_up(now, r.detail);
        a.scripts = std::move(up.scripts);
        a.first_up = up.first_up;
    }
    return a;
}

SessionActions SessionControl::path_reconnect(Clock::time_point now, const std::string& why) {
    SessionActions a;
    if (attempt_ && outage_.active() && attempt_->purpose == AttemptPurpose::reconnect &&
        now - attempt_->began >= kStaleAttempt && !retry_now_) {
        a.add(Level::info, "path changed (" + why + "): " + attempt_why_ +
                               " (begun on the old path) cancelled, the next one now");
        a.cancel_attempt = true;
        retry_now_ = true;
        return a;
    }
    if (attempt_) {
        a.add(Level::info, "path changed (" + why + "); a new connection is being made already (" + attempt_why_ + ")");
        return a;
    }
    if (outage_.active()) {
        a.add(Level::info, "path changed (" + why + "): next reconnect attempt now");
        outage_.policy().attempt_now(now);
        return tick_into(a, now);
    }
    a = link_lost(now, "path changed: " + why);
    if (outage_.active()) outage_.policy().attempt_now(now);
    return tick_into(a, now);
}

SessionActions SessionControl::tick_into(SessionActions& a, Clock::time_point now) {
    SessionActions t = tick(now);
    for (LogLine& l : t.log) a.log.push_back(std::move(l));
    for (auto r : t.scripts) a.scripts.push_back(r);
    if (t.start_attempt) a.start_attempt = t.start_attempt;
    if (t.end) a.end = t.end;
    return std::move(a);
}

SessionActions SessionControl::tick(Clock::time_point now) {
    SessionActions a;
    if (!outage_.active()) return a;
    if (auto gave_up = outage_.given_up(now)) {
        a.add(Level::error, *gave_up);
        a.end = TunnelEnd::reconnect_timed_out;
        return a;
    }
    if (attempt_ || awaiting_up_ || !outage_.policy().attempt_due(now)) return a;
    std::string line = outage_.begin_attempt(now);
    a.add(Level::info, line + ": " + attempt_text_);
    begin(a, AttemptPurpose::reconnect, std::move(line), now);
    return a;
}

}  // namespace espvpn::session
