// GlobalProtect's periodic HIP: the period (--force-trojan, the portal's and the gateway's
// hip-report-interval) and the schedule of checks, retries and early checks.
#include <doctest/doctest.h>

#include "src/session/gp/hip_renewal.h"

using namespace espvpn::session;
using std::chrono::seconds;
using Clock = HipSchedule::Clock;

TEST_CASE("hip period: --force-trojan as given, else the portal's, the gateway's or 3600 s less a minute") {
    CHECK(hip_period_s(30, 7200u, 600) == 30);         // forced, as openconnect: exactly
    CHECK(hip_period_s(0, 7200u, 600) == 7140);        // the portal's wins over the gateway's
    CHECK(hip_period_s(0, std::nullopt, 600) == 540);  // a gateway-only interval
    CHECK(hip_period_s(0, std::nullopt, 0) == 3540);   // nobody set one: openconnect's 3600
    CHECK(hip_period_s(0, 0u, 0) == 3540);             // "0" in the portal config: not set
    // Short intervals: half of it (openconnect's "interval - 60" would be zero or negative).
    CHECK(hip_period_s(0, 120u, 0) == 60);
    CHECK(hip_period_s(0, 4u, 0) == 2);
    CHECK(hip_period_s(0, 1u, 0) == 1);
}

TEST_CASE("hip schedule: one period after the start and after each success") {
    const Clock::time_point t0{};
    HipSchedule s(seconds(100), t0);
    CHECK(s.next() == t0 + seconds(100));
    s.succeeded(t0 + seconds(101));
    CHECK(s.next() == t0 + seconds(201));
    s.due_now(t0 + seconds(150));  // a reconnect: at once
    CHECK(s.next() == t0 + seconds(150));
}

TEST_CASE("hip schedule: failures back off from 5 s, doubling, at most 60 s and never past the period") {
    const Clock::time_point t0{};
    HipSchedule s(seconds(3540), t0);
    Clock::time_point now = t0 + seconds(3540);
    for (int wait : {5, 10, 20, 40, 60, 60}) {
        CHECK(s.failed(now) == seconds(wait));
        CHECK(s.next() == now + seconds(wait));
        now = s.next();
    }
    CHECK(s.failures() == 6);
    s.succeeded(now);
    CHECK(s.failures() == 0);
    CHECK(s.failed(now) == seconds(5));  // the backoff starts again

    HipSchedule short_one(seconds(2), t0);
    CHECK(short_one.failed(t0) == seconds(2));
    CHECK(short_one.failed(t0) == seconds(2));
}
