// The two threads of a packet pipeline (tx and rx), each with its
// ControlChannel and its name (esp-tx, dtls-rx, tls-tx ...: what top -H and
// perf show): started together, told to stop and joined together. Shared by
// every pipeline (ESP, DTLS, the TLS-framed tunnels).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace espvpn::datapath {

using Clock = std::chrono::steady_clock;

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


class PipelineThreads {
public:
    PipelineThreads() = default;
    ~PipelineThreads() { stop(); }
    PipelineThreads(const PipelineThreads&) = delete;
    PipelineThreads& operator=(const PipelineThreads&) = delete;

    // Runs tx_run and rx_run on their own threads; throws std::system_error if a
    // thread cannot start (stop() then joins what did start).
    // Names are at most 15 characters.
    void start(const char* tx_name, ControlChannel& tx, std::function<void()> tx_run, const char* rx_name,
               ControlChannel& rx, std::function<void()> rx_run);
    // Sets each channel's stop flag, wakes it, joins both threads. Idempotent.
    void stop();

private:
    ControlChannel* tx_control_ = nullptr;
    ControlChannel* rx_control_ = nullptr;
    std::thread tx_;
    std::thread rx_;
};

}  // namespace espvpn::datapath
