// ReconnectPolicy: the backoff schedule and the --reconnect-timeout deadline.
#include <doctest/doctest.h>

#include "src/session/reconnect_policy.h"

using namespace espvpn::session;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = ReconnectPolicy::Clock;

TEST_CASE("reconnect: waits double from 1 s up to the cap, each counted from the failure") {
    const Clock::time_point t0{};
    ReconnectPolicy p(t0, seconds(300));
    CHECK_FALSE(p.attempt_due(t0));
    CHECK_FALSE(p.attempt_due(t0 + milliseconds(999)));
    CHECK(p.attempt_due(t0 + seconds(1)));
    Clock::time_point now = t0 + seconds(1);
    for (int wait : {2, 4, 8, 10, 10, 10}) {
        p.begin_attempt();
        now += milliseconds(250);  // the attempt itself takes a while
        CHECK_FALSE(p.attempt_due(now));  // one at a time
        p.attempt_failed(now);
        CHECK(p.next_attempt() == now + seconds(wait));
        CHECK_FALSE(p.attempt_due(now + seconds(wait) - milliseconds(1)));
        now = p.next_attempt();
        CHECK(p.attempt_due(now));
    }
    CHECK(p.attempts() == 6);
    CHECK(p.outage(now) == now - t0);
}

TEST_CASE("reconnect: the last attempt falls on the deadline, then it has expired") {
    const Clock::time_point t0{};
    ReconnectPolicy p(t0, seconds(5));
    CHECK(p.deadline() == t0 + seconds(5));
    p.begin_attempt();
    p.attempt_failed(t0 + seconds(1));  // next at 3 s
    p.begin_attempt();
    p.attempt_failed(t0 + seconds(3));  // 4 s later would be 7 s: clamped to 5 s
    CHECK(p.next_attempt() == t0 + seconds(5));
    CHECK_FALSE(p.expired(t0 + seconds(5)));
    // Noticed a little late (a slow step): the attempt on the deadline is still made.
    const auto late = t0 + seconds(5) + milliseconds(80);
    CHECK_FALSE(p.expired(late));
    CHECK(p.attempt_due(late));
    p.begin_attempt();
    CHECK(p.expired(late));  // in flight past the deadline: no reprieve
    p.attempt_failed(late + seconds(1));
    CHECK(p.expired(late + seconds(1)));
    CHECK(p.attempts() == 3);
}

TEST_CASE("reconnect: attempt_now brings the next attempt forward, never past the deadline") {
    const Clock::time_point t0{};
    ReconnectPolicy p(t0, seconds(30));
    p.begin_attempt();
    p.attempt_failed(t0 + seconds(1));
    CHECK_FALSE(p.attempt_due(t0 + seconds(2)));
    p.attempt_now(t0 + seconds(2));
    CHECK(p.attempt_due(t0 + seconds(2)));
    p.begin_attempt();
    p.attempt_failed(t0 + seconds(29));
    CHECK(p.next_attempt() == t0 + seconds(30));
    p.attempt_now(t0 + seconds(31));  // too late: nothing scheduled on or before the deadline
    CHECK(p.expired(t0 + seconds(31)));
}

TEST_CASE("reconnect: a zero timeout allows one immediate attempt; odd arguments are clamped") {
    const Clock::time_point t0{};
    ReconnectPolicy zero(t0, seconds(0));
    CHECK(zero.attempt_due(t0));
    CHECK_FALSE(zero.expired(t0 + milliseconds(1)));
    zero.begin_attempt();
    CHECK(zero.expired(t0 + milliseconds(1)));
    ReconnectPolicy negative(t0, seconds(-3));
    CHECK(negative.deadline() == t0);
    // A cap below the first wait is raised to it; a zero first wait becomes 1 ms.
    ReconnectPolicy p(t0, seconds(60), seconds(4), seconds(1));
    p.begin_attempt();
    p.attempt_failed(t0 + seconds(4));
    CHECK(p.next_attempt() == t0 + seconds(8));
    ReconnectPolicy tiny(t0, seconds(60), Clock::duration(0));
    CHECK(tiny.next_attempt() == t0 + milliseconds(1));
}

TEST_CASE("reconnect: durations are logged in seconds with one decimal") {
    CHECK(ReconnectPolicy::seconds_text(std::chrono::milliseconds(2540)) == "2.5 s");
    CHECK(ReconnectPolicy::seconds_text(std::chrono::seconds(0)) == "0.0 s");
}

TEST_CASE("outage: the first loss starts it, later ones are failed attempts with the next wait") {
    const Clock::time_point t0{};
    Outage o("the server", seconds(300));
    CHECK_FALSE(o.active());
    CHECK_FALSE(o.given_up(t0 + seconds(1000)));
    auto first = o.lose(t0, "EOF");
    CHECK(first.started);
    CHECK(first.message == "connection to the server lost: EOF; reconnecting for up to 300 s (--reconnect-timeout)");
    REQUIRE(o.active());
    CHECK(o.policy().lost_at() == t0);
    CHECK_FALSE(o.policy().attempt_due(t0));
    CHECK(o.begin_attempt(t0 + seconds(1)) == "reconnect attempt 1 (outage 1.0 s)");
    auto second = o.lose(t0 + milliseconds(1500), "refused");
    CHECK_FALSE(second.started);
    CHECK(second.message == "reconnect attempt 1 failed: refused; next in 2.0 s (outage 1.5 s)");
    CHECK(o.last_error() == "refused");
    CHECK(o.policy().lost_at() == t0);  // a failed attempt does not restart the outage
    CHECK(o.end(t0 + seconds(4)) == seconds(4));
    CHECK_FALSE(o.active());
    CHECK(o.last_error().empty());
    CHECK(o.lose(t0 + seconds(10), "again").started);  // a new outage after a reconnect
    CHECK(o.policy().lost_at() == t0 + seconds(10));
}

TEST_CASE("outage: past the deadline no attempt is announced and the give-up line names the option") {
    const Clock::time_point t0{};
    Outage o("the gateway", seconds(5));
    o.lose(t0, "timeout");
    o.begin_attempt(t0 + seconds(1));
    o.lose(t0 + seconds(1), "refused");  // next at 3 s
    o.begin_attempt(t0 + seconds(3));
    o.lose(t0 + seconds(3), "refused");  // clamped to 5 s
    CHECK_FALSE(o.given_up(t0 + seconds(5)));
    o.begin_attempt(t0 + seconds(5));
    auto last = o.lose(t0 + seconds(6), "still refused");
    CHECK(last.message == "reconnect attempt 3 failed: still refused; no more attempts (--reconnect-timeout 5) (outage 6.0 s)");
    auto line = o.given_up(t0 + seconds(6));
    REQUIRE(line);
    CHECK(*line == "no connection to the gateway for 6.0 s, giving up (--reconnect-timeout 5); last error: still refused");
}
