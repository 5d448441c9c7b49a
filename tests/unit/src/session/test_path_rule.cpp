// PathRule (roaming, issue 22) and SessionControl::path_reconnect on a fake clock:
// a path change is coalesced, then probed (same local address) or reconnected (address
// changed, probe unanswered, path back during an outage); reconnects are rate-limited; an
// outage's attempt begun on the old path is cancelled and made again.
#include <doctest/doctest.h>

#include <string>

#include "src/session/path_rule.h"
#include "src/session/session_control.h"

using namespace espvpn::session;
using std::chrono::milliseconds;
using Clock = PathRule::Clock;
using Action = PathRule::Action;

namespace {

struct Fixture {
    PathRule rule;
    Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
    std::string local = "10.0.0.2";
    int lookups = 0;
    PathRule::State state{false, true, Clock::time_point{}};

    Fixture() { rule.set_local(local); }
    PathRule::Decision at(milliseconds ms) {
        return rule.step(t0 + ms, state, [this] {
            ++lookups;
            return local;
        });
    }
};

}  // namespace

TEST_CASE("a path change is coalesced, then probed when the local address is the same") {
    Fixture f;
    f.rule.event(f.t0);
    f.rule.event(f.t0 + milliseconds(50));
    f.rule.event(f.t0 + milliseconds(150));
    CHECK(f.at(milliseconds(100)).action == Action::none);
    CHECK(f.lookups == 0);  // no check inside the coalescing window
    REQUIRE(f.rule.next_due());
    CHECK(*f.rule.next_due() == f.t0 + milliseconds(200));
    CHECK(f.at(milliseconds(200)).action == Action::probe);
    CHECK(f.lookups == 1);  // one check for the whole burst
    CHECK(f.rule.counters().events == 3);
    CHECK(f.rule.counters().checks == 1);
    // Answered: nothing more.
    f.state.last_rx = f.t0 + milliseconds(300);
    CHECK(f.at(milliseconds(400)).action == Action::none);
    CHECK(f.at(milliseconds(5000)).action == Action::none);
    CHECK(!f.rule.next_due());
    CHECK(f.rule.counters().reconnects == 0);
}

TEST_CASE("an unanswered probe reconnects after the probe timeout") {
    Fixture f;
    f.state.last_rx = f.t0 - milliseconds(10);
    f.rule.event(f.t0);
    CHECK(f.at(milliseconds(200)).action == Action::probe);
    CHECK(f.at(milliseconds(1100)).action == Action::none);
    const auto d = f.at(milliseconds(1200));
    CHECK(d.action == Action::reconnect);
    CHECK(d.why.find("no answer to the probe") != std::string::npos);
    CHECK(f.rule.counters().probe_failures == 1);
    CHECK(f.rule.counters().reconnects == 1);
}

TEST_CASE("a new local address reconnects at once, without a probe") {
    Fixture f;
    f.rule.event(f.t0);
    f.local = "10.0.0.5";
    const auto d = f.at(milliseconds(200));
    CHECK(d.action == Action::reconnect);
    CHECK(d.why.find("10.0.0.2 -> 10.0.0.5") != std::string::npos);
    CHECK(f.rule.local() == "10.0.0.5");
    CHECK(f.rule.counters().probes == 0);
}

TEST_CASE("no route: nothing; the path back with the same address is probed, in an outage reconnected") {
    Fixture f;
    f.rule.event(f.t0);
    f.local = "";
    CHECK(f.at(milliseconds(200)).action == Action::none);
    CHECK(f.rule.local() == "10.0.0.2");  // kept: the link may come back on it
    f.local = "10.0.0.2";
    f.rule.event(f.t0 + milliseconds(3000));
    CHECK(f.at(milliseconds(3200)).action == Action::probe);

    Fixture g;
    g.state.in_outage = true;
    g.state.can_probe = false;
    g.rule.event(g.t0);
    const auto d = g.at(milliseconds(200));
    CHECK(d.action == Action::reconnect);
    CHECK(d.why.find("path to the server") != std::string::npos);
}

TEST_CASE("a flapping link: at most one reconnect per second, none lost") {
    Fixture f;
    int reconnects = 0;
    // The address changes every 100 ms for 5 s; the session is stepped every 10 ms.
    for (int ms = 0; ms <= 5000; ms += 10) {
        if (ms % 100 == 0) {
            f.rule.event(f.t0 + milliseconds(ms));
            f.local = (ms / 100) % 2 ? "10.0.0.5" : "10.0.0.2";
        }
        if (f.at(milliseconds(ms)).action == Action::reconnect) ++reconnects;
    }
    CHECK(reconnects >= 4);
    CHECK(reconnects <= 6);  // 5 s at one a second (the first at 200 ms)
    CHECK(f.rule.counters().deferred >= 1);
    // The flapping stops: the last change still gets its reconnect, one second after the previous.
    int later = 0;
    for (int ms = 5010; ms <= 8000; ms += 10)
        if (f.at(milliseconds(ms)).action == Action::reconnect) ++later;
    CHECK(later <= 1);
    CHECK(!f.rule.next_due());
}

TEST_CASE("SessionControl::path_reconnect drops the link and starts the attempt at once") {
    const auto t0 = Clock::time_point{} + std::chrono::hours(1);
    SessionControl c("the gateway", std::chrono::seconds(60), "getconfig");
    c.link_up(t0, "over ESP");
    SessionActions a = c.path_reconnect(t0 + milliseconds(5), "the local address for the server changed");
    CHECK(a.drop_link);
    REQUIRE(a.start_attempt);
    CHECK(*a.start_attempt == AttemptPurpose::reconnect);  // not 1 s later (the outage's first backoff)
    CHECK(c.in_outage());
    CHECK(c.attempt_in_flight());
    // While it runs, another path change does nothing.
    SessionActions b = c.path_reconnect(t0 + milliseconds(10), "again");
    CHECK(!b.drop_link);
    CHECK(!b.start_attempt);
    // The attempt failed: the outage's backoff (1 s) would wait; a path change brings it forward.
    AttemptResult failed;
    failed.kind = AttemptResult::Kind::failed;
    failed.why = "getconfig: no route";
    c.attempt_finished(t0 + milliseconds(20), failed);
    CHECK(!c.tick(t0 + milliseconds(30)).start_attempt);
    SessionActions d = c.path_reconnect(t0 + milliseconds(40), "a path to the server is back");
    REQUIRE(d.start_attempt);
    CHECK(!d.drop_link);
}

TEST_CASE("SessionControl::path_reconnect cancels an outage's attempt begun on the old path and makes it again at once") {
    const auto t0 = Clock::time_point{} + std::chrono::hours(1);
    SessionControl c("the gateway", std::chrono::seconds(60), "getconfig");
    c.link_up(t0, "over ESP");
    SessionActions a = c.path_reconnect(t0 + milliseconds(5), "no answer to the probe within 1000 ms");
    REQUIRE(a.start_attempt);
    // A young attempt (under kStaleAttempt) is left alone: it may be on the new path already.
    SessionActions b = c.path_reconnect(t0 + milliseconds(505), "a path to the server changed");
    CHECK(!b.cancel_attempt);
    CHECK(!b.start_attempt);
    // One that has run for a second began on the old path (its SYN lost there): cancelled, and
    // no second attempt beside it.
    SessionActions d = c.path_reconnect(t0 + milliseconds(1005), "a path to the server changed");
    CHECK(d.cancel_attempt);
    CHECK(!d.start_attempt);
    CHECK(!d.drop_link);
    CHECK(c.attempt_in_flight());
    CHECK(!c.path_reconnect(t0 + milliseconds(1007), "again").cancel_attempt);  // once per attempt
    // Its end (cancelled): the next attempt at once, not after the backoff.
    c.attempt_finished(t0 + milliseconds(1010), AttemptResult::failed("cancelled"));
    SessionActions e = c.tick(t0 + milliseconds(1011));
    REQUIRE(e.start_attempt);
    CHECK(*e.start_attempt == AttemptPurpose::reconnect);
    // A plain failure afterwards waits for the backoff again.
    c.attempt_finished(t0 + milliseconds(1100), AttemptResult::failed("connection refused"));
    CHECK(!c.tick(t0 + milliseconds(1101)).start_attempt);
}

TEST_CASE("a resume is checked at once and an unanswered probe reconnects after the resume timeout") {
    Fixture f;
    f.state.last_rx = f.t0 - milliseconds(10);
    f.rule.resumed(f.t0, true);
    REQUIRE(f.rule.next_due());
    CHECK(*f.rule.next_due() == f.t0);  // no coalescing window
    CHECK(f.at(milliseconds(0)).action == Action::probe);
    CHECK(f.rule.counters().resumes == 1);
    CHECK(f.rule.counters().sleep_signals == 1);
    CHECK(f.at(milliseconds(499)).action == Action::none);
    PathRule::Decision d = f.at(milliseconds(500));
    CHECK(d.action == Action::reconnect);
    CHECK(d.why.find("after the resume") != std::string::npos);
    // A clock-jump resume counts as a resume, not as logind's signal; answered: nothing.
    f.rule.resumed(f.t0 + milliseconds(3000), false);
    CHECK(f.at(milliseconds(3000)).action == Action::probe);
    f.state.last_rx = f.t0 + milliseconds(3100);
    CHECK(f.at(milliseconds(4000)).action == Action::none);
    CHECK(f.rule.counters().resumes == 2);
    CHECK(f.rule.counters().sleep_signals == 1);
    CHECK(f.rule.counters().reconnects == 1);
}

TEST_CASE("a resume during an outage or with a new local address reconnects at once") {
    Fixture f;
    f.state.in_outage = true;
    f.state.can_probe = false;
    f.rule.resumed(f.t0, false);
    PathRule::Decision d = f.at(milliseconds(0));
    CHECK(d.action == Action::reconnect);
    CHECK(d.why.find("resumed") != std::string::npos);
    Fixture g;
    g.local = "10.9.0.7";
    g.rule.resumed(g.t0, true);
    CHECK(g.at(milliseconds(0)).action == Action::reconnect);
}

TEST_CASE("slept(): the loop stayed away more than 3 s past its poll timeout") {
    CHECK(!slept(milliseconds(100), milliseconds(100)));
    CHECK(!slept(milliseconds(100), milliseconds(3000)));  // a loaded machine's stall is not a sleep
    CHECK(slept(milliseconds(100), milliseconds(3200)));
    CHECK(slept(milliseconds(1000), milliseconds(15000)));
    CHECK(!slept(milliseconds(-1), milliseconds(2900)));
}
