#include <doctest/doctest.h>

#include "protocols/tunnel/dpd_timer.h"

using namespace espvpn;
using namespace std::chrono_literals;
using Clock = DpdTimer::Clock;

TEST_CASE("DPD: silence for dpd sends a request, repeated every dpd/2, dead after 2 x dpd") {
    const Clock::time_point t0{};
    DpdTimer t({10s, 0s}, t0);
    CHECK(t.poll(t0 + 9s) == DpdAction::none);
    CHECK(t.next_due() == t0 + 10s);
    CHECK(t.poll(t0 + 10s) == DpdAction::send_dpd_request);
    CHECK(t.poll(t0 + 12s) == DpdAction::none);  // one outstanding
    CHECK(t.next_due() == t0 + 15s);
    CHECK(t.poll(t0 + 15s) == DpdAction::send_dpd_request);
    CHECK(t.poll(t0 + 19s) == DpdAction::none);
    CHECK(t.poll(t0 + 20s) == DpdAction::peer_dead);
    CHECK(t.poll(t0 + 21s) == DpdAction::peer_dead);  // stays dead until something arrives
    t.on_receive(t0 + 21s);
    CHECK(t.poll(t0 + 22s) == DpdAction::none);
    CHECK(t.next_due() == t0 + 31s);
}

TEST_CASE("DPD: any received packet resets the clock and answers the outstanding request") {
    const Clock::time_point t0{};
    DpdTimer t({10s, 0s}, t0);
    CHECK(t.poll(t0 + 10s) == DpdAction::send_dpd_request);
    t.on_receive(t0 + 11s);
    CHECK(t.poll(t0 + 20s) == DpdAction::none);
    CHECK(t.poll(t0 + 21s) == DpdAction::send_dpd_request);
    t.on_receive(t0 + 5s);   // an older timestamp never moves the clock back
    t.on_receive(t0 + 11s);  // nor does the same one again (a poller re-reading liveness)
    CHECK(t.poll(t0 + 25s) == DpdAction::none);  // still outstanding
    CHECK(t.poll(t0 + 26s) == DpdAction::send_dpd_request);
    CHECK(t.poll(t0 + 31s) == DpdAction::peer_dead);
}

TEST_CASE("Keepalive: sent when nothing was sent for the interval; sends reset it") {
    const Clock::time_point t0{};
    DpdTimer t({0s, 30s}, t0);
    CHECK(t.poll(t0 + 29s) == DpdAction::none);
    CHECK(t.poll(t0 + 30s) == DpdAction::send_keepalive);
    CHECK(t.poll(t0 + 31s) == DpdAction::none);
    t.on_send(t0 + 50s);
    CHECK(t.poll(t0 + 79s) == DpdAction::none);
    CHECK(t.next_due() == t0 + 80s);
    CHECK(t.poll(t0 + 80s) == DpdAction::send_keepalive);
    CHECK(t.poll(t0 + 1000s) == DpdAction::send_keepalive);  // never "dead" without DPD
}

TEST_CASE("DPD and keepalive off: nothing is ever due") {
    DpdTimer t({}, Clock::time_point{});
    CHECK(t.poll(Clock::time_point{} + 100000s) == DpdAction::none);
    CHECK(t.next_due() == Clock::time_point::max());
}

TEST_CASE("GP's rule: probes every max(dpd/2, 1 s) while quiet, dead after 2 x dpd; a fresh start restarts it") {
    const Clock::time_point t0{};
    DpdTimer t({1s, 0s, 1s}, t0);  // --force-dpd=1
    CHECK(t.poll(t0 + 999ms) == DpdAction::none);
    CHECK(t.poll(t0 + 1s) == DpdAction::send_dpd_request);
    CHECK(t.poll(t0 + 1500ms) == DpdAction::none);  // dpd/2 = 500 ms, but not below 1 s
    CHECK(t.next_due() == t0 + 2s);
    CHECK(t.poll(t0 + 1999ms) == DpdAction::none);
    CHECK(t.poll(t0 + 2s) == DpdAction::peer_dead);
    DpdTimer gp({10s, 0s, 1s}, t0);  // the default 10 s: the floor does not bite
    CHECK(gp.poll(t0 + 10s) == DpdAction::send_dpd_request);
    CHECK(gp.poll(t0 + 14s) == DpdAction::none);
    CHECK(gp.poll(t0 + 15s) == DpdAction::send_dpd_request);
    gp.on_receive(Clock::time_point{});  // a channel's "never" stamp is no sign of life
    CHECK(gp.poll(t0 + 20s) == DpdAction::peer_dead);
    CHECK(gp.last_receive() == t0);
}

TEST_CASE("CSTP's rule: the channel's own send stamps hold the keepalive off, a quiet peer gets DPD") {
    const Clock::time_point t0{};
    DpdTimer t({30s, 20s}, t0);
    for (int s = 5; s <= 25; s += 5) {  // data flows both ways
        t.on_send(t0 + std::chrono::seconds(s));
        t.on_receive(t0 + std::chrono::seconds(s));
        CHECK(t.poll(t0 + std::chrono::seconds(s)) == DpdAction::none);
    }
    CHECK(t.poll(t0 + 44s) == DpdAction::none);
    CHECK(t.poll(t0 + 45s) == DpdAction::send_keepalive);    // 20 s since the last send at 25 s
    CHECK(t.poll(t0 + 54s) == DpdAction::none);
    CHECK(t.poll(t0 + 55s) == DpdAction::send_dpd_request);  // 30 s since the last receive
    CHECK(t.poll(t0 + 69s) == DpdAction::none);              // the request counts as a send
    CHECK(t.poll(t0 + 70s) == DpdAction::send_dpd_request);  // dpd/2 later, still unanswered
    CHECK(t.poll(t0 + 84s) == DpdAction::none);
    CHECK(t.poll(t0 + 85s) == DpdAction::peer_dead);
}
