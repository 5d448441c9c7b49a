#include "protocols/anyconnect/dtls_dpd.h"

#include <algorithm>

namespace espvpn::anyconnect {

DpdTimer::DpdTimer(const DpdSettings& settings, Clock::time_point now)
    : settings_(settings), last_rx_(now), last_tx_(now), last_dpd_sent_(now) {}

void DpdTimer::on_receive(Clock::time_point when) {
    if (when <= last_rx_) return;  // the same (or an older) sign of life again
    last_rx_ = when;
    dpd_outstanding_ = false;
}

void DpdTimer::on_send(Clock::time_point when) { last_tx_ = std::max(last_tx_, when); }

DpdAction DpdTimer::poll(Clock::time_point now) {
    const auto dpd = settings_.dpd;
    if (dpd.count() > 0) {
        const auto silent = now - last_rx_;
        if (silent >= 2 * dpd) return DpdAction::peer_dead;
        if (silent >= dpd && (!dpd_outstanding_ || now - last_dpd_sent_ >= dpd / 2)) {
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
        due = std::min(due, dpd_outstanding_ ? last_dpd_sent_ + dpd / 2 : last_rx_ + dpd);
    }
    if (settings_.keepalive.count() > 0) due = std::min(due, last_tx_ + settings_.keepalive);
    return due;
}

}  // namespace espvpn::anyconnect
