#include "src/datapath/send_turn.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace espvpn::datapath {

namespace {
constexpr std::uint64_t kTunTag = 1;
constexpr std::uint64_t kControlTag = 2;
}  // namespace

SendTurn::SendTurn(int tun_fd, ControlChannel& tx_control)
    : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)), tun_fd_(tun_fd), tx_control_(tx_control) {
    if (epoll_fd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    epoll_event control{};
    control.events = EPOLLIN;
    control.data.u64 = kControlTag;
    epoll_event tun{};
    tun.events = EPOLLIN;
    tun.data.u64 = kTunTag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, tx_control_.fd(), &control) != 0 ||
        (tun_fd_ >= 0 && ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, tun_fd_, &tun) != 0)) {
        const int e = errno;
        ::close(epoll_fd_);
        throw std::system_error(e, std::generic_category(), "epoll_ctl");
    }
}

SendTurn::~SendTurn() { ::close(epoll_fd_); }

bool SendTurn::take_tx() {
    int idle = kIdle;
    if (state_.compare_exchange_strong(idle, kTx, std::memory_order_acquire)) return true;
    if (idle == kTx) return true;
    // The rx thread holds it. Ask, then look again: give_rx stores idle before it reads the
    // flag, so either this sees idle or give_rx sees the flag (both sequentially consistent).
    tx_waiting_.store(true, std::memory_order_seq_cst);
    idle = kIdle;
    if (state_.compare_exchange_strong(idle, kTx, std::memory_order_seq_cst)) {
        tx_waiting_.store(false, std::memory_order_relaxed);
        return true;
    }
    return false;
}

void SendTurn::give_tx() { state_.store(kIdle, std::memory_order_release); }

SendTurn::Woken SendTurn::wait_tx(int timeout_ms, PipelineFailure& failure) {
    Woken woken;
    if (broken_.load(std::memory_order_acquire)) {
        woken.failed = !wait_for_work(tx_control_, tun_fd_, timeout_ms, failure);
        return woken;
    }
    epoll_event events[2];
    const int n = ::epoll_wait(epoll_fd_, events, 2, timeout_ms);
    if (n < 0 && errno != EINTR) {
        failure.set(std::string("epoll_wait: ") + std::strerror(errno));
        woken.failed = true;
        return woken;
    }
    for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kControlTag) {
            tx_control_.drain();
            woken.control = true;
        } else {
            woken.tun = true;
        }
    }
    return woken;
}

bool SendTurn::take_rx() {
    if (rx_holds_) return true;
    int idle = kIdle;
    if (broken_.load(std::memory_order_relaxed) ||
        !state_.compare_exchange_strong(idle, kRx, std::memory_order_acquire))
        return false;
    if (!watch_tun(false)) {  // the tx thread would be woken anyway: leave it the work
        release_rx();
        return false;
    }
    rx_holds_ = true;
    return true;
}

void SendTurn::give_rx() {
    if (!rx_holds_) return;
    rx_holds_ = false;
    release_rx();
    // Level-triggered: a tun that has packets now wakes the tx thread at once. Should the
    // kernel refuse (it has no reason to), the tx thread goes back to poll() for good.
    if (!watch_tun(true)) {
        broken_.store(true, std::memory_order_release);
        tx_control_.notify();
    }
}

// Idle again; then the flag take_tx sets before its second look (both sequentially
// consistent: one of the two sees the other).
void SendTurn::release_rx() {
    state_.store(kIdle, std::memory_order_seq_cst);
    if (tx_waiting_.exchange(false, std::memory_order_seq_cst)) tx_control_.notify();
}

bool SendTurn::watch_tun(bool on) {
    if (tun_fd_ < 0) return true;
    epoll_event tun{};
    tun.events = on ? static_cast<std::uint32_t>(EPOLLIN) : 0u;  // no events: the kernel's wake-ups for the tun skip this set
    tun.data.u64 = kTunTag;
    return ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, tun_fd_, &tun) == 0;
}

}  // namespace espvpn::datapath
