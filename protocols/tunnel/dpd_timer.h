// DpdTimer: the one dead-peer rule for every channel of both protocols (GP's ESP
// probes and HTTPS-tunnel keepalives, AnyConnect's CSTP and DTLS DPD;
// docs/protocols/anyconnect.md §5, docs/protocols/globalprotect.md §10.6), as a
// pure state machine on a clock the caller passes in. The caller feeds the
// channel's last-receive/last-send stamps and sends what poll() asks for:
//   - any received packet is a sign of life; nothing received for `dpd`
//     -> send a DPD request (GP: an ESP probe or an HTTPS keepalive), repeated
//     every max(dpd/2, min_repeat) while unanswered;
//   - nothing received for 2 x dpd -> the peer is dead;
//   - nothing sent for `keepalive` -> send a keepalive (AnyConnect only).
#pragma once

#include <chrono>

namespace espvpn {

struct DpdSettings {
    std::chrono::seconds dpd{0};        // X-DTLS-DPD / X-CSTP-DPD, GP's 10 s; 0 = no DPD
    std::chrono::seconds keepalive{0};  // X-DTLS-Keepalive / X-CSTP-Keepalive; 0 = none
    std::chrono::milliseconds min_repeat{0};  // a floor on the dpd/2 repeat (GP: 1 s)
};

enum class DpdAction { none, send_dpd_request, send_keepalive, peer_dead };

class DpdTimer {
public:
    using Clock = std::chrono::steady_clock;

    // `start` counts as the last packet received and sent (a channel just up).
    DpdTimer(const DpdSettings& settings, Clock::time_point start);

    void on_receive(Clock::time_point when);  // any packet from the peer (older stamps are ignored)
    void on_send(Clock::time_point when);     // any packet to the peer

    // What is due at `now`. A returned send_* is taken as done (its timer
    // restarts); peer_dead is returned until on_receive.
    DpdAction poll(Clock::time_point now);
    // When poll() next has something to do (time_point::max() if never).
    Clock::time_point next_due() const;
    Clock::time_point last_receive() const { return last_rx_; }
    const DpdSettings& settings() const { return settings_; }

private:
    Clock::duration repeat() const;

    DpdSettings settings_;
    Clock::time_point last_rx_;
    Clock::time_point last_tx_;
    Clock::time_point last_dpd_sent_;
    bool dpd_outstanding_ = false;
};

}  // namespace espvpn
