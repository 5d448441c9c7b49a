// Roaming (issue 22): what a change of the network path to the server means for
// the session. rtnetlink reports address, link and route changes (src/io/route_watch.h);
// this rule, sans-IO on the caller's clock, decides:
//  - changes are coalesced: the path is checked `coalesce` after the first one of a burst
//    (an address move is a delete and an add; a link comes up with its routes after it);
//  - the check asks the caller for the local address the kernel now picks for the server
//    (empty: no route). A different address, or a path that came back during an outage:
//    reconnect now. The same address: probe now (GP: an ESP probe, AnyConnect: a DPD); no
//    answer within `probe_timeout`: reconnect. No route: nothing (the next change checks again);
//  - reconnects are rate-limited: at most one per `min_interval`; one due earlier waits for
//    its turn (a flapping link costs one reconnect a second at most, and none is lost).
//  - a resume from suspend (logind's PrepareForSleep(false), or the clock jump of slept())
//    is a change checked at once (no coalescing), probed with the shorter `resume_probe_timeout`:
//    after a sleep the old path (NAT mapping, the server's state) is often dead.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace espvpn::session {

struct PathRuleSettings {
    std::chrono::milliseconds coalesce{200};
    std::chrono::milliseconds probe_timeout{1000};
    std::chrono::milliseconds min_interval{1000};  // between two path reconnects
    std::chrono::milliseconds resume_probe_timeout{500};
};

// The control loop asked poll() for `asked` and CLOCK_BOOTTIME advanced `boot_elapsed`:
// the process did not run for a while — the machine slept (BOOTTIME counts suspend, MONOTONIC
// does not) or the process was stopped (SIGSTOP) or starved. More than 3 s past what was asked.
bool slept(std::chrono::milliseconds asked, std::chrono::milliseconds boot_elapsed);


struct PathCounters {
    std::uint64_t events = 0;      // rtnetlink changes seen
    std::uint64_t checks = 0;      // coalesced checks of the path
    std::uint64_t probes = 0;      // probes sent because of a check
    std::uint64_t probe_failures = 0;
    std::uint64_t reconnects = 0;  // reconnects asked for because of the path
    std::uint64_t deferred = 0;    // reconnects that waited for the rate limit
    std::uint64_t resumes = 0;     // resumes seen (logind or the clock jump)
    std::uint64_t sleep_signals = 0;  // of them, logind's PrepareForSleep(false)
};

class PathRule {
public:
    using Clock = std::chrono::steady_clock;

    enum class Action { none, probe, reconnect };
    struct Decision {
        Action action = Action::none;
        std::string why;  // reconnect: for the log
    };
    // What the session knows when a check or a probe is decided.
    struct State {
        bool in_outage = false;     // no link carries data now
        bool can_probe = false;     // the link can be probed (else only an address change counts)
        Clock::time_point last_rx;  // the link's last authentic packet from the server
    };

    explicit PathRule(PathRuleSettings settings = {}) : s_(settings) {}

    // The local address the session's link uses now (at its start and after a reconnect).
    void set_local(std::string local) { known_ = std::move(local); }
    const std::string& local() const { return known_; }
    // An rtnetlink change at `now`.
    void event(Clock::time_point now);
    // A resume from suspend (or a stop) at `now`: `from_logind` counts it as logind's signal.
    void resumed(Clock::time_point now, bool from_logind);
    // One step: `lookup` gives the local address for the server now ("" = no route); it is
    // called only when a check is due.
    Decision step(Clock::time_point now, const State& state, const std::function<std::string()>& lookup);
    // The next time step() has something to do (for the poll timeout); nullopt: none.
    std::optional<Clock::time_point> next_due() const;
    const PathCounters& counters() const { return counters_; }

private:
    void want_reconnect(std::string why);

    PathRuleSettings s_;
    std::string known_;
    bool pending_ = false;
    Clock::time_point check_at_;
    bool path_down_ = false;  // the last check found no route
    bool probing_ = false;
    bool resume_ = false;  // the pending check is a resume's
    bool probe_resume_ = false;
    std::chrono::milliseconds probe_timeout_{0};
    Clock::time_point probe_since_, probe_deadline_;
    bool reconnect_wanted_ = false;
    bool deferred_noted_ = false;
    std::string reconnect_why_;
    std::optional<Clock::time_point> last_reconnect_;
    PathCounters counters_;
};

}  // namespace espvpn::session
