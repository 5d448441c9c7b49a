// Dead-peer detection and keepalive timing for one AnyConnect channel
// (docs anyconnect.md section 5), as a pure state machine on a clock the
// caller passes in. The same rules hold for CSTP and DTLS, so either channel
// may use it:
//   - any received packet is a sign of life; nothing received for `dpd`
//     -> send a DPD request, repeated every dpd/2 while unanswered;
//   - nothing received for 2 x dpd -> the peer is dead (DTLS: fall back to CSTP);
//   - nothing sent for `keepalive` -> send a keepalive.
#pragma once

#include <chrono>

namespace espvpn::anyconnect {

struct DpdSettings {
    std::chrono::seconds dpd{0};        // X-DTLS-DPD / X-CSTP-DPD; 0 = no DPD
    std::chrono::seconds keepalive{0};  // X-DTLS-Keepalive / X-CSTP-Keepalive; 0 = none
};

enum class DpdAction { none, send_dpd_request, send_keepalive, peer_dead };

class DpdTimer {
public:
    using Clock = std::chrono::steady_clock;

    DpdTimer(const DpdSettings& settings, Clock::time_point now);

    void on_receive(Clock::time_point when);  // any packet from the peer
    void on_send(Clock::time_point when);     // any packet to the peer

    // What is due at `now`. A returned send_* is taken as done (its timer
    // restarts); peer_dead is returned until on_receive.
    DpdAction poll(Clock::time_point now);
    // When poll() next has something to do (time_point::max() if never).
    Clock::time_point next_due() const;

private:
    DpdSettings settings_;
    Clock::time_point last_rx_;
    Clock::time_point last_tx_;
    Clock::time_point last_dpd_sent_;
    bool dpd_outstanding_ = false;
};

}  // namespace espvpn::anyconnect
