// The decisions of a tunnel session, for both protocols (openconnect's one
// mainloop over its per-protocol table): what a signal means, when a lost link
// starts an outage, when the next reconnect attempt is due and when to give up,
// what a finished attempt changes, which scripts run, and why the session ended.
// Sans-IO: events go in with the time, actions come out (log lines included);
// tunnel_session.cpp does the I/O and a protocol driver (gp/, anyconnect/)
// opens, renews and steps the links.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/host/script_env.h"
#include "src/log/logger.h"
#include "src/session/reconnect_policy.h"

namespace espvpn::session {

// Why a tunnel session ended (or, for connection_lost, why a link did).
enum class TunnelEnd {
    user_logout,          // SIGINT / SIGTERM: logged out
    user_detach,          // SIGHUP: disconnected, the session (cookie) stays valid
    server_disconnect,    // the server ended the session
    connection_lost,      // a link failed or closed: reconnectable, the session goes on
    reconnect_timed_out,  // no link came back within --reconnect-timeout
    cookie_rejected,      // the server refused the session cookie
    captive_portal,       // the gateway cannot be reached, a captive portal answers instead (the session stays valid)
    error,
};
const char* describe(TunnelEnd end);

// Why a new link is being made: an outage (no link), or beside a working one.
enum class AttemptPurpose {
    reconnect,  // no link: the outage's attempt
    renew,      // SIGUSR2 (or a "new-tunnel" rekey): make the new link before the old one goes
    rekey,      // new keys for the link that runs (GP: a getconfig; no scripts)
    fallback,   // the link died, another kind replaces it (GP: ESP -> the HTTPS tunnel); its
                // failure is the link's loss
};

// How an attempt ended, as the driver saw it once it had adopted (or dropped) its result.
struct AttemptResult {
    enum class Kind {
        opened,           // the new link runs (up: carries data now; else the driver reports link_up later)
        failed,           // no new link; `why`
        cookie_rejected,  // the session is gone
        fatal,            // the session cannot go on (`why`, `end`)
    };
    Kind kind = Kind::failed;
    std::string why;
    bool up = true;                 // opened: carries data already
    std::string detail;             // opened + up: "to host:port" / "over ESP", for the log line
    std::string note;               // appended to the log line (failed renewal: "; trying again in 5 s")
    bool old_link_down = false;     // failed renewal: the old link is gone too (its step reports how)
    TunnelEnd end = TunnelEnd::error;

    static AttemptResult of(Kind kind, std::string why = {}) {
        AttemptResult r;
        r.kind = kind;
        r.why = std::move(why);
        return r;
    }
    static AttemptResult failed(std::string why, std::string note = {}) {
        AttemptResult r = of(Kind::failed, std::move(why));
        r.note = std::move(note);
        return r;
    }
    static AttemptResult opened(std::string detail = {}, std::string note = {}, bool up = true) {
        AttemptResult r = of(Kind::opened);
        r.detail = std::move(detail);
        r.note = std::move(note);
        r.up = up;
        return r;
    }
    static AttemptResult fatal(std::string why) { return of(Kind::fatal, std::move(why)); }
};

struct LogLine {
    log::Level level;
    std::string text;
};

// What the caller does after an event, in this order: log, scripts, drop the
// link, start an attempt, report the first connection, end.
struct SessionActions {
    std::vector<LogLine> log;
    std::vector<host::ScriptReason> scripts;  // queued, not awaited
    bool drop_link = false;                    // the link is lost: stop it (the tun stays)
    bool cancel_attempt = false;               // cancel the attempt in flight (its end is reported as usual)
    std::optional<AttemptPurpose> start_attempt;
    bool first_up = false;                     // traffic flows for the first time (-b detaches)
    std::optional<std::chrono::steady_clock::duration> outage_ended;  // its length
    std::optional<TunnelEnd> end;

    void add(log::Level level, std::string text) { log.push_back({level, std::move(text)}); }
};

class SessionControl {
public:
    using Clock = std::chrono::steady_clock;

    // `peer`: "the server" / "the gateway"; `attempt_text`: what an attempt does, for its log line.
    // `always_on`: the outage never ends the session (--always-on).
    SessionControl(std::string peer, std::chrono::seconds reconnect_timeout, std::string attempt_text,
                   bool always_on = false);

    // SIGINT/SIGTERM end with a logout, SIGHUP detaches; SIGUSR2 renews the link (when
    // `renew_blocked` is empty; else it says why not), or brings the next attempt forward.
    SessionActions signal(int sig, Clock::time_point now, std::string_view renew_blocked = {});
    // The driver's link events.
    SessionActions link_up(Clock::time_point now, const std::string& detail, const std::string& suffix = {});
    SessionActions link_lost(Clock::time_point now, const std::string& why);
    SessionActions link_ended(TunnelEnd end, const std::string& why);
    // The driver wants a new link (or keys) beside the working one; ignored while an attempt runs.
    SessionActions renew(AttemptPurpose purpose, const std::string& why, bool scripts);
    SessionActions attempt_finished(Clock::time_point now, const AttemptResult& result);
    // Roaming (path_rule.h): the path to the server changed for good: the link is dropped and
    // the reconnect (same cookie) starts at once; during an outage its next attempt comes now,
    // and an attempt that has run for kStaleAttempt already (begun on the old path: its TCP SYN
    // lost there, the next retransmission 1-4 s away) is cancelled and made again at once.
    static constexpr std::chrono::milliseconds kStaleAttempt{1000};
    SessionActions path_reconnect(Clock::time_point now, const std::string& why);
    // Timers: the outage's next attempt, or giving up.
    SessionActions tick(Clock::time_point now);

    bool attempt_in_flight() const { return attempt_.has_value(); }
    AttemptPurpose attempt_purpose() const { return attempt_ ? attempt_->purpose : AttemptPurpose::reconnect; }
    const std::string& attempt_why() const { return attempt_why_; }
    bool in_outage() const { return outage_.active(); }
    // The outage's last error ("" when there is no outage).
    const std::string& last_error() const { return outage_.last_error(); }

private:
    struct Attempt {
        AttemptPurpose purpose;
        Clock::time_point began;
    };
    void begin(SessionActions& a, AttemptPurpose purpose, std::string why, Clock::time_point now);
    // `a` with the actions of tick(now) appended.
    SessionActions tick_into(SessionActions& a, Clock::time_point now);

    Outage outage_;
    std::string attempt_text_;
    std::optional<Attempt> attempt_;
    std::string attempt_why_;   // of the last attempt begun
    bool awaiting_up_ = false;  // an opened link that is not up yet (GP: probing)
    bool renewing_ = false;     // a renewal's `reconnect` script is due once its link is up
    bool retry_now_ = false;    // the cancelled attempt is made again at once, not after the backoff
    bool ever_up_ = false;
};

}  // namespace espvpn::session
