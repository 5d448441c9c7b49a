#include "protocols/tunnel/dpd_timer.h"

#include <algorithm>

namespace espvpn {

DpdTimer::DpdTimer(const DpdSettings& settings, Clock::time_point start)
    : settings_(settings), last_rx_(start), last_tx_(start), last_dpd_sent_(start) {}

void DpdTimer::on_receive(Clock::time_point when) {
    if (when <= last_rx_) return;  // the same (or an older) sign of life again
    last_rx_ = when;
    dpd_outstanding_ = false;
}

void DpdTimer::on_send(Clock::time_point when) { last_tx_ = std::max(last_tx_, when); }

DpdTimer::Clock::duration DpdTimer::repeat() const {
    return std::max<Clock::duration>(settings_.dpd / 2, settings_.min_repeat);
}

DpdAction DpdTimer::poll(Clock::time_point now) {
    const auto dpd = settings_.dpd;
    if (dpd.count() > 0) {
        const auto silent = now - last_rx_;
        if (silent >= 2 * dpd) return DpdAction::peer_dead;
        if (silent >= dpd && (!dpd_outstanding_ || now - last_dpd_sent_ >= repeat())) {
            dpd_outstanding_ = true;
            last_dpd_sent_ = now;
            last_tx_ = now;
            return DpdAction::send_dpd_request;
        }
    }
    if (settings_.keepalive.count() > 0 && now - last_tx_ >= settings_.keepalive) {
        last_tx_ = now;
        return DpdAction::send_keepalive;
    }
    return DpdAction::none;
}

DpdTimer::Clock::time_point DpdTimer::next_due() const {
    Clock::time_point due = Clock::time_point::max();
    const auto dpd = settings_.dpd;
    if (dpd.count() > 0) {
        due = std::min(due, last_rx_ + 2 * dpd);
        due = std::min(due, dpd_outstanding_ ? last_dpd_sent_ + repeat() : last_rx_ + dpd);
    }
    if (settings_.keepalive.count() > 0) due = std::min(due, last_tx_ + settings_.keepalive);
    return due;
}

}  // namespace espvpn
