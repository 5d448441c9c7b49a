// SendTurn: which of a UDP pipeline's two threads may use its send side right now (the
// tun's reading, the outbound SA and its sequence numbers, the socket's send buffers and
// the tx counters): the tx thread, or the rx thread just after it wrote a batch to the tun.
//
// Why: a TCP download through the tunnel makes the kernel answer every tun write with
// ACKs, which it queues on the tun. With the tx thread waiting in poll() on the tun, each
// of those wakes it: a sleep and a context switch per received batch, more than the ACKs'
// own cost when the server sends one datagram at a time. With the turn, the rx thread
// takes the send side before its tun write (only when the tx thread is idle), reads what
// the tun has at once, seals and sends it itself; meanwhile the tun is muted in the tx
// thread's epoll set, so the kernel's ACKs do not wake it.
//
// One holder at a time, by an atomic state (no lock, nobody waits for it): the holder
// seals with the one outbound SA, so sequence numbers and nonces are never used twice, and
// an SA is only replaced by the tx thread while it holds the turn. The rx thread's hold is
// short (one tun read, seal and send per batch it delivers) and it gives the turn back
// before it sleeps, unmuting the tun (epoll reports a tun that became readable meanwhile at
// once) and waking the tx thread if it asked for the turn in between.
#pragma once

#include <atomic>

#include "src/datapath/pipeline_threads.h"

namespace espvpn::datapath {

class SendTurn {
public:
    // Makes the tx thread's epoll set over `tun_fd` and the tx control channel's fd.
    // Throws std::system_error if the kernel refuses.
    SendTurn(int tun_fd, ControlChannel& tx_control);
    ~SendTurn();
    SendTurn(const SendTurn&) = delete;
    SendTurn& operator=(const SendTurn&) = delete;

    // The tx thread holds the turn from the start, until its first give_tx (so that it
    // takes its first SA before anything is sealed).
    // tx thread. take_tx: true when it holds the turn (the rx thread does not); else it
    // is marked as waiting and the rx thread notifies the tx control channel when it gives
    // the turn back. give_tx: back to idle.
    bool take_tx();
    void give_tx();
    // tx thread: waits (epoll) for the tun (unless muted), the control channel (drained)
    // or timeout_ms (-1: none; 0: only looks). `failed` when the wait itself failed
    // (failure is set).
    struct Woken {
        bool failed = false;
        bool tun = false;
        bool control = false;
    };
    Woken wait_tx(int timeout_ms, PipelineFailure& failure);

    // rx thread. take_rx: true when it holds the turn (already, or now because the tx
    // thread was idle: the tun is then muted in the tx thread's set). give_rx: if held,
    // idle again, the tun unmuted, the tx thread notified if it asked meanwhile.
    bool take_rx();
    void give_rx();
    bool rx_holds() const { return rx_holds_; }
    // rx thread, holding the turn: whether the tx thread asked for it since.
    bool tx_asked() const { return tx_waiting_.load(std::memory_order_relaxed); }

private:
    enum : int { kIdle = 0, kTx = 1, kRx = 2 };
    bool watch_tun(bool on);
    void release_rx();

    int epoll_fd_ = -1;
    int tun_fd_ = -1;
    ControlChannel& tx_control_;
    bool rx_holds_ = false;  // the rx thread's own view
    std::atomic<int> state_{kTx};
    std::atomic<bool> tx_waiting_{false};
    std::atomic<bool> broken_{false};  // epoll_ctl refused to unmute: no more muting, tx polls
};

}  // namespace espvpn::datapath
