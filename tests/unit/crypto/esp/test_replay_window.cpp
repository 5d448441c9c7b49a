#include <doctest/doctest.h>

#include <set>

#include "crypto/replay_window.h"

using namespace espvpn;

namespace {
// Check, and accept when fresh, as the receive path does.
ReplayVerdict receive(ReplayWindow& w, std::uint32_t seq) {
    ReplayVerdict v = w.check(seq);
    if (v == ReplayVerdict::fresh) w.accept(seq);
    return v;
}
}  // namespace

TEST_CASE("replay window: first packet, in order, duplicates") {
    ReplayWindow w;
    CHECK(w.empty());
    CHECK(receive(w, 0) == ReplayVerdict::fresh);  // OpenConnect-style peers start at 0
    CHECK(receive(w, 0) == ReplayVerdict::duplicate);
    for (std::uint32_t s = 1; s < 5000; ++s) REQUIRE(receive(w, s) == ReplayVerdict::fresh);
    CHECK(w.highest() == 4999);
    CHECK(receive(w, 4999) == ReplayVerdict::duplicate);
    CHECK(receive(w, 4000) == ReplayVerdict::duplicate);
}

TEST_CASE("replay window: window edge and too old") {
    static_assert(ReplayWindow::kWindowSize >= 1024);
    ReplayWindow w;
    const std::uint32_t top = 100000;
    CHECK(receive(w, top) == ReplayVerdict::fresh);
    const std::uint32_t oldest_in = top - (ReplayWindow::kWindowSize - 1);
    CHECK(w.check(oldest_in) == ReplayVerdict::fresh);
    CHECK(w.check(oldest_in - 1) == ReplayVerdict::too_old);
    CHECK(receive(w, oldest_in) == ReplayVerdict::fresh);
    CHECK(receive(w, oldest_in) == ReplayVerdict::duplicate);
    CHECK(w.check(0) == ReplayVerdict::too_old);
}

TEST_CASE("replay window: late packets inside the window, reordering") {
    ReplayWindow w;
    for (std::uint32_t s = 1; s <= 3000; s += 2) REQUIRE(receive(w, s) == ReplayVerdict::fresh);  // odd only
    // Even numbers within the window arrive late and are accepted once.
    for (std::uint32_t s = 3000; s > 3000 - 1000; s -= 2) {
        CHECK(receive(w, s) == ReplayVerdict::fresh);
        CHECK(receive(w, s) == ReplayVerdict::duplicate);
    }
}

TEST_CASE("replay window: far jumps ahead clear stale bits, no aliasing") {
    ReplayWindow w;
    for (std::uint32_t s = 1; s <= 64 * 40; ++s) REQUIRE(receive(w, s) == ReplayVerdict::fresh);
    // Jump by exactly one ring: the ring slot of old numbers must not read as "seen".
    const std::uint32_t jump = 64 * 40 + ReplayWindow::kBits;
    CHECK(receive(w, jump) == ReplayVerdict::fresh);
    for (std::uint32_t s = jump - ReplayWindow::kWindowSize + 1; s < jump; ++s)
        REQUIRE(w.check(s) == ReplayVerdict::fresh);
    // Small slides, word boundaries.
    for (std::uint32_t d : {1u, 63u, 64u, 65u, 127u, 1000u, 1983u, 1984u, 2047u, 2048u, 5000u}) {
        std::uint32_t before = w.highest();
        CAPTURE(d);
        CHECK(receive(w, before + d) == ReplayVerdict::fresh);
        CHECK(receive(w, before + d) == ReplayVerdict::duplicate);
        if (d < ReplayWindow::kWindowSize) {
            CHECK(w.check(before) == ReplayVerdict::duplicate);
            if (d > 1) CHECK(w.check(before + 1) == ReplayVerdict::fresh);
        } else {
            CHECK(w.check(before) == ReplayVerdict::too_old);
        }
    }
}

TEST_CASE("replay window: check alone never changes state (forged packets)") {
    ReplayWindow w;
    receive(w, 10);
    for (std::uint32_t s : {11u, 1000000u, 0xFFFFFFFFu, 5u}) CHECK(w.check(s) == ReplayVerdict::fresh);
    CHECK(w.highest() == 10);
    CHECK(w.check(1000000) == ReplayVerdict::fresh);
    CHECK(w.check(9) == ReplayVerdict::fresh);  // not pushed out by the unaccepted far one
}

TEST_CASE("replay window: top of the 32-bit space") {
    ReplayWindow w;
    CHECK(receive(w, 0xFFFFFFF0u) == ReplayVerdict::fresh);
    CHECK(receive(w, 0xFFFFFFFFu) == ReplayVerdict::fresh);
    CHECK(receive(w, 0xFFFFFFFFu) == ReplayVerdict::duplicate);
    CHECK(receive(w, 0xFFFFFFF5u) == ReplayVerdict::fresh);
    CHECK(w.check(0) == ReplayVerdict::too_old);  // no wrap without ESN
}

TEST_CASE("replay window: matches a simple model under a pseudo-random sequence") {
    ReplayWindow w;
    std::set<std::uint32_t> seen;
    std::uint32_t highest = 0;
    bool any = false;
    std::uint32_t x = 12345;
    std::uint32_t base = 1000;
    for (int i = 0; i < 20000; ++i) {
        x = x * 1103515245u + 12345u;
        base += (x >> 16) % 4;
        std::uint32_t seq = base - ((x >> 8) % 2500) + 1200;
        ReplayVerdict expected;
        if (any && seq <= highest && highest - seq >= ReplayWindow::kWindowSize) expected = ReplayVerdict::too_old;
        else if (seen.count(seq)) expected = ReplayVerdict::duplicate;
        else expected = ReplayVerdict::fresh;
        ReplayVerdict got = receive(w, seq);
        REQUIRE(got == expected);
        if (got == ReplayVerdict::fresh) {
            seen.insert(seq);
            if (!any || seq > highest) highest = seq;
            any = true;
        }
    }
}
