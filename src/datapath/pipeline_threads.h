// The two threads of a packet pipeline (tx and rx), each with its
// ControlChannel and its name (esp-tx, dtls-rx, tls-tx ...: what top -H and
// perf show): started together, told to stop and joined together. Shared by
// every pipeline (ESP, DTLS, the TLS-framed tunnels).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "protocols/base/result.h"

namespace espvpn::datapath {

using Clock = std::chrono::steady_clock;

// When something last happened on a pipeline thread (its one writer), for any
// thread to read: a relaxed atomic, no lock. The epoch means never.
class Timestamp {
public:
    void set(Clock::time_point t) { rep_.store(t.time_since_epoch().count(), std::memory_order_relaxed); }
    Clock::time_point get() const { return Clock::time_point(Clock::duration(rep_.load(std::memory_order_relaxed))); }

private:
    std::atomic<Clock::rep> rep_{0};
};

// How the control plane reaches one pipeline thread: an eventfd that wakes it
// from poll(), and a flag it checks between batches so a busy thread needs no
// syscall to notice.
class ControlChannel {
public:
    ControlChannel();  // throws std::system_error if no eventfd can be made
    ~ControlChannel();
    ControlChannel(const ControlChannel&) = delete;
    ControlChannel& operator=(const ControlChannel&) = delete;

    int fd() const { return fd_; }
    void notify();                          // control side
    bool pending() const { return pending_.load(std::memory_order_relaxed); }
    bool begin_handling() { return pending_.exchange(false, std::memory_order_acq_rel); }
    void drain();                           // pipeline side, after poll saw fd readable
    std::atomic<bool> stop{false};

private:
    int fd_ = -1;
    std::atomic<bool> pending_{false};
};

// A thread's fatal error, readable from the control thread.
class PipelineFailure {
public:
    void set(std::string message);
    std::optional<std::string> get() const;

private:
    std::string message_;
    std::atomic<bool> failed_{false};
};


// One wait of a pipeline thread in poll(): for `fd` to be readable (-1: none),
// the control channel (drained) or the timeout (ms; -1: none). False when
// poll() itself failed (the failure is set).
bool wait_for_work(ControlChannel& control, int fd, int timeout_ms, PipelineFailure& failure);

class PipelineThreads {
public:
    PipelineThreads() = default;
    ~PipelineThreads() { stop(); }
    PipelineThreads(const PipelineThreads&) = delete;
    PipelineThreads& operator=(const PipelineThreads&) = delete;

    // Called on a thread whose seccomp filter the kernel refused (`tx`: which one; the
    // thread then ends without running).
    using Refused = std::function<void(bool tx, const std::string& why)>;
    // Runs tx_run and rx_run on their own threads, each under the datapath seccomp
    // filter (src/sandbox); throws std::system_error if a thread cannot start (stop()
    // then joins what did start). Names are at most 15 characters.
    void start(const char* tx_name, ControlChannel& tx, std::function<void()> tx_run, const char* rx_name,
               ControlChannel& rx, std::function<void()> rx_run, const Refused& refused);
    // Sets each channel's stop flag, wakes it, joins both threads. Idempotent.
    void stop();

private:
    ControlChannel* tx_control_ = nullptr;
    ControlChannel* rx_control_ = nullptr;
    std::thread tx_;
    std::thread rx_;
};

// What every pipeline owns: its tx and rx halves (each with a ControlChannel
// `control` and a PipelineFailure `failure`) and their threads, which are
// stopped and joined before the halves go.
template <class Tx, class Rx>
class PipelinePair {
public:
    PipelinePair() = default;
    ~PipelinePair() { stop(); }
    PipelinePair(const PipelinePair&) = delete;
    PipelinePair& operator=(const PipelinePair&) = delete;

    // make() builds tx and rx (may throw); then both threads run tx->run() / rx->run().
    template <class Make>
    Status start(const std::string& what, const char* tx_name, const char* rx_name, Make&& make) {
        try {
            make();
            threads_.start(tx_name, tx->control, [p = tx.get()] { p->run(); }, rx_name, rx->control,
                           [p = rx.get()] { p->run(); },
                           [this](bool on_tx, const std::string& why) { (on_tx ? tx->failure : rx->failure).set(why); });
        } catch (const std::exception& e) {
            stop();
            return make_error(what + ": cannot start: " + e.what());
        }
        return {};
    }
    // Joins both threads (idempotent).
    void stop() {
        stopped = true;
        threads_.stop();
    }
    // Counts one more request of the tx thread's (`requests` is one of its counters) and wakes it.
    void ask_tx(std::atomic<std::uint32_t>& requests) {
        if (stopped) return;
        requests.fetch_add(1, std::memory_order_release);
        tx->control.notify();
    }
    // Both halves' counters, as the pipeline's stats struct (fields `tx` and `rx`).
    template <class Stats>
    Stats snapshot() const {
        Stats s;
        s.tx = tx->counters.snapshot();
        s.rx = rx->counters.snapshot();
        return s;
    }
    // Empty while both threads run; the reason (after the side's prefix) when one stopped.
    std::optional<std::string> failure(const char* tx_prefix = "tx: ", const char* rx_prefix = "rx: ") const {
        if (auto f = tx->failure.get()) return tx_prefix + *f;
        if (auto f = rx->failure.get()) return rx_prefix + *f;
        return std::nullopt;
    }

    std::unique_ptr<Tx> tx;
    std::unique_ptr<Rx> rx;
    bool stopped = false;

private:
    PipelineThreads threads_;  // after tx and rx: joined before they are destroyed
};

}  // namespace espvpn::datapath
