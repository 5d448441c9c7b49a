// SessionControl: the session loop's decisions for both protocols (signals,
// outage, reconnect attempts, rekey, renewals, end reasons) on a fake clock.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/session/link_attempt.h"
#include "src/session/session_control.h"

using namespace espvpn::session;
using espvpn::host::ScriptReason;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = SessionControl::Clock;
using Kind = AttemptResult::Kind;

namespace {

bool logged(const SessionActions& a, const std::string& text) {
    return std::any_of(a.log.begin(), a.log.end(), [&](const LogLine& l) { return l.text.find(text) != std::string::npos; });
}

AttemptResult result(Kind kind, std::string why = {}) {
    AttemptResult r;
    r.kind = kind;
    r.why = std::move(why);
    return r;
}

AttemptResult opened(std::string detail, bool up = true) {
    AttemptResult r;
    r.kind = Kind::opened;
    r.detail = std::move(detail);
    r.up = up;
    return r;
}

struct Session {
    SessionControl c{"the server", seconds(300), "new TLS connection"};
    Clock::time_point t0{};
    Session() {
        SessionActions a = c.link_up(t0, "to gw");
        CHECK(a.first_up);
        CHECK(a.scripts.empty());
    }
};

}  // namespace

TEST_CASE("session: signals end the session with their reason") {
    Session s;
    CHECK(s.c.signal(SIGINT, s.t0).end == TunnelEnd::user_logout);
    CHECK(s.c.signal(SIGTERM, s.t0).end == TunnelEnd::user_logout);
    CHECK(s.c.signal(SIGHUP, s.t0).end == TunnelEnd::user_detach);
    CHECK_FALSE(s.c.signal(SIGUSR1, s.t0).end);
}

TEST_CASE("session: end reasons from the link and from attempts, each described") {
    Session s;
    SessionActions a = s.c.link_ended(TunnelEnd::server_disconnect, "the server sent DISCONNECT");
    CHECK(a.end == TunnelEnd::server_disconnect);
    CHECK(logged(a, "DISCONNECT"));

    // A refused cookie on a reconnect ends the session (exit 2), whatever the outage has left.
    s.c.link_lost(s.t0, "TLS closed");
    a = s.c.tick(s.t0 + seconds(1));
    REQUIRE(a.start_attempt == AttemptPurpose::reconnect);
    a = s.c.attempt_finished(s.t0 + seconds(1), result(Kind::cookie_rejected, "401"));
    CHECK(a.end == TunnelEnd::cookie_rejected);

    SessionControl other("the gateway", seconds(300), "getconfig");
    other.link_lost(s.t0, "gone");
    other.tick(s.t0 + seconds(1));
    AttemptResult fatal = result(Kind::fatal, "other addresses");
    fatal.end = TunnelEnd::error;
    CHECK(other.attempt_finished(s.t0 + seconds(1), fatal).end == TunnelEnd::error);

    const TunnelEnd all[] = {TunnelEnd::user_logout,         TunnelEnd::user_detach,     TunnelEnd::server_disconnect,
                             TunnelEnd::connection_lost,     TunnelEnd::reconnect_timed_out,
                             TunnelEnd::cookie_rejected,     TunnelEnd::error};
    for (TunnelEnd e : all) CHECK(std::string(describe(e)) != "?");
    CHECK(std::string(describe(TunnelEnd::user_logout)) != describe(TunnelEnd::user_detach));
}

TEST_CASE("session: a lost link starts the outage; attempts follow the backoff until one reconnects") {
    Session s;
    SessionActions a = s.c.link_lost(s.t0, "nothing received for 20 s");
    CHECK(a.drop_link);
    REQUIRE(a.log.size() == 1);
    CHECK(a.log[0].level == espvpn::log::Level::warn);
    CHECK(logged(a, "connection to the server lost: nothing received for 20 s; reconnecting for up to 300 s"));
    CHECK(a.scripts == std::vector<ScriptReason>{ScriptReason::attempt_reconnect});
    CHECK(s.c.in_outage());

    CHECK_FALSE(s.c.tick(s.t0 + milliseconds(999)).start_attempt);
    a = s.c.tick(s.t0 + seconds(1));
    CHECK(a.start_attempt == AttemptPurpose::reconnect);
    CHECK(logged(a, "reconnect attempt 1 (outage 1.0 s): new TLS connection"));
    CHECK_FALSE(s.c.tick(s.t0 + seconds(5)).start_attempt);  // one at a time

    a = s.c.attempt_finished(s.t0 + seconds(2), result(Kind::failed, "connection refused"));
    CHECK(logged(a, "reconnect attempt 1 failed: connection refused; next in 2.0 s"));
    CHECK_FALSE(a.end);
    CHECK_FALSE(s.c.tick(s.t0 + milliseconds(3999)).start_attempt);
    a = s.c.tick(s.t0 + seconds(4));
    CHECK(a.start_attempt == AttemptPurpose::reconnect);
    CHECK(logged(a, "reconnect attempt 2"));

    AttemptResult ok = opened("to 10.0.0.1:443");
    ok.note = " (tun packets dropped meanwhile: 3)";
    a = s.c.attempt_finished(s.t0 + seconds(4) + milliseconds(500), ok);
    CHECK(logged(a, "reconnected to 10.0.0.1:443 after 2 attempt(s); outage 4500 ms (tun packets dropped meanwhile: 3)"));
    CHECK(a.scripts == std::vector<ScriptReason>{ScriptReason::reconnect});
    REQUIRE(a.outage_ended);
    CHECK(*a.outage_ended == milliseconds(4500));
    CHECK_FALSE(a.first_up);  // -b detached at the first connection, not again
    CHECK_FALSE(s.c.in_outage());
}

TEST_CASE("session: no attempt succeeds within --reconnect-timeout: the session ends") {
    SessionControl c("the gateway", seconds(5), "getconfig");
    const Clock::time_point t0{};
    c.link_up(t0, "over ESP");
    c.link_lost(t0, "ESP dead");
    Clock::time_point now = t0;
    int attempts = 0;
    for (int i = 0; i < 100; ++i, now += milliseconds(100)) {
        SessionActions a = c.tick(now);
        if (a.end) {
            CHECK(*a.end == TunnelEnd::reconnect_timed_out);
            CHECK(logged(a, "giving up (--reconnect-timeout 5); last error: refused"));
            break;
        }
        if (a.start_attempt) {
            ++attempts;
            c.attempt_finished(now, result(Kind::failed, "refused"));
        }
    }
    CHECK(attempts == 3);  // at 1 s, 3 s and on the deadline (5 s)
    CHECK(now > t0 + seconds(5));
    CHECK(now < t0 + seconds(6));
}

TEST_CASE("session: --always-on: no deadline, the wait grows to 60 s, a route change brings the next attempt") {
    SessionControl c("the gateway", seconds(5), "getconfig", true);
    const Clock::time_point t0{};
    c.link_up(t0, "over ESP");
    SessionActions lost = c.link_lost(t0, "ESP dead");
    CHECK(logged(lost, "reconnecting until it is back (--always-on)"));
    Clock::time_point now = t0;
    std::vector<Clock::time_point> starts;
    bool ended = false;
    // Two hours of failures (100 ms turns): never an end; 1, 2, 4 ... 60 s apart.
    for (int i = 0; i < 72000 && !ended; ++i, now += milliseconds(100)) {
        SessionActions a = c.tick(now);
        ended = a.end.has_value();
        if (a.start_attempt) {
            starts.push_back(now);
            c.attempt_finished(now, result(Kind::failed, "refused"));
        }
    }
    CHECK(!ended);
    REQUIRE(starts.size() > 10);
    CHECK(starts[1] - starts[0] == seconds(2));
    CHECK(starts[5] - starts[4] == seconds(32));
    for (std::size_t i = 7; i < starts.size(); ++i) CHECK(starts[i] - starts[i - 1] == seconds(60));
    CHECK(c.in_outage());
    CHECK(c.last_error() == "refused");
    // A route change: the next attempt now instead of up to 60 s later.
    SessionActions p = c.path_reconnect(now, "a new local address");
    CHECK(p.start_attempt);
    c.attempt_finished(now, AttemptResult::opened("over ESP"));
    CHECK(!c.in_outage());
}

TEST_CASE("session: an opened link that is not up yet (GP probing) holds the attempts; its up ends the outage") {
    Session s;
    s.c.link_lost(s.t0, "ESP dead");
    s.c.tick(s.t0 + seconds(1));
    SessionActions a = s.c.attempt_finished(s.t0 + seconds(1), opened("over ESP", false));
    CHECK(a.log.empty());
    CHECK(s.c.in_outage());
    CHECK_FALSE(s.c.tick(s.t0 + seconds(30)).start_attempt);
    a = s.c.link_up(s.t0 + seconds(2), "over ESP", " since the transport was declared lost");
    CHECK(logged(a, "reconnected over ESP after 1 attempt(s); outage 2000 ms since the transport was declared lost"));
    CHECK(a.scripts == std::vector<ScriptReason>{ScriptReason::reconnect});
}

TEST_CASE("session: SIGUSR2 renews a working link (make-before-break), or hurries the outage's attempt") {
    Session s;
    SessionActions a = s.c.signal(SIGUSR2, s.t0, "a TLS rehandshake is running");
    CHECK_FALSE(a.start_attempt);
    CHECK(logged(a, "a TLS rehandshake is running; ignored"));

    a = s.c.signal(SIGUSR2, s.t0);
    CHECK(a.start_attempt == AttemptPurpose::renew);
    CHECK(logged(a, "SIGUSR2: reconnecting with the same session"));
    CHECK(a.scripts == std::vector<ScriptReason>{ScriptReason::attempt_reconnect});
    a = s.c.signal(SIGUSR2, s.t0 + milliseconds(10));
    CHECK_FALSE(a.start_attempt);
    CHECK(logged(a, "a new connection is being made (SIGUSR2); ignored"));

    // The new link cannot be made: the old one carries on, nothing ends, no outage.
    AttemptResult failed = result(Kind::failed, "timed out");
    a = s.c.attempt_finished(s.t0 + seconds(10), failed);
    CHECK(logged(a, "SIGUSR2: no new connection (timed out); the current one carries on"));
    CHECK_FALSE(a.end);
    CHECK_FALSE(a.drop_link);
    CHECK_FALSE(s.c.in_outage());

    s.c.signal(SIGUSR2, s.t0 + seconds(11));
    a = s.c.attempt_finished(s.t0 + seconds(12), opened("to gw (SIGUSR2) after 1 attempt(s); outage 3 ms"));
    CHECK(logged(a, "reconnected to gw (SIGUSR2)"));
    CHECK(a.scripts == std::vector<ScriptReason>{ScriptReason::reconnect});

    // During an outage, SIGUSR2 makes the next attempt due now.
    s.c.link_lost(s.t0 + seconds(20), "gone");
    s.c.tick(s.t0 + seconds(21));
    s.c.attempt_finished(s.t0 + seconds(21), result(Kind::failed, "refused"));  // next at 23 s
    CHECK_FALSE(s.c.tick(s.t0 + seconds(22)).start_attempt);
    a = s.c.signal(SIGUSR2, s.t0 + seconds(22));
    CHECK(logged(a, "SIGUSR2: next reconnect attempt now"));
    CHECK(s.c.tick(s.t0 + seconds(22)).start_attempt == AttemptPurpose::reconnect);
}

TEST_CASE("session: the link lost while its replacement is being made: that attempt is the outage's first") {
    Session s;
    s.c.renew(AttemptPurpose::renew, "rekey (new-tunnel) after 60 s", true);
    SessionActions a = s.c.link_lost(s.t0 + seconds(1), "the server closed the TLS connection");
    CHECK(logged(a, "reconnect attempt 1 (outage 0.0 s): the new connection begun for \"rekey (new-tunnel) after 60 s\""));
    CHECK(s.c.attempt_purpose() == AttemptPurpose::reconnect);
    CHECK_FALSE(s.c.tick(s.t0 + seconds(5)).start_attempt);  // it is still being made
    a = s.c.attempt_finished(s.t0 + seconds(2), opened("to gw"));
    CHECK(logged(a, "reconnected to gw after 1 attempt(s); outage 1000 ms"));
}

TEST_CASE("session: a rekey is an attempt without scripts; its failure keeps the session") {
    Session s;
    SessionActions a = s.c.renew(AttemptPurpose::rekey, "rekey", false);
    CHECK(a.start_attempt == AttemptPurpose::rekey);
    CHECK(a.scripts.empty());
    CHECK(a.log.empty());
    CHECK_FALSE(s.c.renew(AttemptPurpose::rekey, "rekey", false).start_attempt);  // one at a time
    AttemptResult failed = result(Kind::failed, "gateway unreachable");
    failed.note = "; trying again in 5 s";
    a = s.c.attempt_finished(s.t0 + seconds(1), failed);
    CHECK(logged(a, "rekey: gateway unreachable; trying again in 5 s"));
    CHECK_FALSE(a.end);
    CHECK_FALSE(s.c.in_outage());

    s.c.renew(AttemptPurpose::rekey, "rekey", false);
    a = s.c.attempt_finished(s.t0 + seconds(6), opened(""));
    CHECK(a.scripts.empty());
    CHECK(a.log.empty());
    CHECK_FALSE(s.c.attempt_in_flight());

    // No rekey during an outage.
    s.c.link_lost(s.t0 + seconds(7), "gone");
    CHECK_FALSE(s.c.renew(AttemptPurpose::rekey, "rekey", false).start_attempt);
}

TEST_CASE("session: a fallback (GP: ESP -> HTTPS) that fails is the link's loss") {
    Session s;
    SessionActions a = s.c.renew(AttemptPurpose::fallback, "HTTPS tunnel", false);
    CHECK(a.start_attempt == AttemptPurpose::fallback);
    a = s.c.attempt_finished(s.t0 + seconds(1), result(Kind::failed, "ESP dead; HTTPS tunnel: connection timed out"));
    CHECK(a.drop_link);
    CHECK(s.c.in_outage());
    CHECK(logged(a, "connection to the server lost: ESP dead; HTTPS tunnel: connection timed out"));
    CHECK(a.scripts == std::vector<ScriptReason>{ScriptReason::attempt_reconnect});

    // In the outage, the probe of a reconnect goes unanswered: the fallback is allowed, and reconnects.
    s.c.tick(s.t0 + seconds(2));
    s.c.attempt_finished(s.t0 + seconds(2), opened("over ESP", false));
    a = s.c.renew(AttemptPurpose::fallback, "HTTPS tunnel", false);
    CHECK(a.start_attempt == AttemptPurpose::fallback);
    a = s.c.attempt_finished(s.t0 + seconds(8), opened("over the HTTPS tunnel"));
    CHECK(logged(a, "reconnected over the HTTPS tunnel after 1 attempt(s); outage 7000 ms"));
}

TEST_CASE("link attempt: the work runs on its own thread; done_fd wakes the owner; cancel ends a blocked wait") {
    int seen_cancel_fd = -1;
    {
        LinkAttempt a([&](int cancel_fd) { seen_cancel_fd = cancel_fd; });
        pollfd p{a.done_fd(), POLLIN, 0};
        REQUIRE(poll(&p, 1, 5000) == 1);
        CHECK(a.done());
        a.wait();
        CHECK(seen_cancel_fd >= 0);
    }
    // A work blocked on its socket (here: only the cancel fd) ends when the owner goes.
    bool cancelled = false;
    const auto t0 = std::chrono::steady_clock::now();
    {
        LinkAttempt a([&](int cancel_fd) {
            pollfd p{cancel_fd, POLLIN, 0};
            cancelled = poll(&p, 1, 60000) == 1;
        });
        CHECK_FALSE(a.done());
    }
    CHECK(cancelled);
    CHECK(std::chrono::steady_clock::now() - t0 < seconds(30));
}
