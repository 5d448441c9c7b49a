// The rx threads' short wait before receiving, for downloads that arrive one datagram at a time
// (the ESP and DTLS rx pipelines, and the TLS pump's rx thread for CSTP and GP's HTTPS tunnel).
//
// Gateways that send one datagram per call (ASAs, PAN-OS, ocserv) wake the rx thread for a
// few datagrams at a time, so each tun write carries few packets and the kernel runs its TCP
// receive, and sends an ACK back through the tunnel, for each small write. Waiting a little
// after a wake-up lets the next datagrams arrive first; they then reach the tun as one
// coalesced (GRO) packet: fewer receive passes, fewer ACKs, fewer wake-ups.
//
// It waits only while a download is running: the first receive after the last wake-up found
// fewer than a quarter of a batch, those datagrams were data-sized (not ACKs: an upload's
// ACK clock is not delayed), and something was delivered less than a millisecond ago (a
// lone packet after a pause, a ping, an interactive session never wait).
//
// How long it waits follows the arrival rate: it starts at the configured wait (the floor);
// when a wait gathered fewer than kGather datagrams the next one is twice as long (up to
// kMaxFactor times the floor), when it gathered 2 * kGather or more, half as long. So a link
// paced at 200 Mbit/s (a datagram every ~56 µs) settles at a few hundred microseconds and a
// faster one stays at the floor.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace espvpn::datapath {

class RxLinger {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::size_t kDataSized = 1000;  // bytes per datagram, on average
    static constexpr auto kStreamGap = std::chrono::milliseconds(1);
    static constexpr std::size_t kGather = 8;      // datagrams a wait should gather
    static constexpr int kMaxFactor = 8;           // the longest wait, in floors
    static constexpr std::chrono::microseconds kMaxWait{1000};  // and never longer than this

    RxLinger(std::chrono::microseconds floor, std::size_t batch)
        : floor_(floor), max_(std::max(floor, std::min(floor * kMaxFactor, kMaxWait))), wait_(floor), batch_(batch) {}

    // A non-empty receive: how many datagrams, how many bytes. The first after a wake-up counts.
    void received(std::size_t datagrams, std::size_t bytes) {
        if (first_datagrams_ > 0 || datagrams == 0) return;
        first_datagrams_ = datagrams;
        first_data_sized_ = bytes >= kDataSized * datagrams;
    }
    // Packets went to the tun.
    void delivered(Clock::time_point now) { last_delivery_ = now; }

    // After a wake-up: how long to wait before receiving (zero: receive now). Forgets the
    // last wake-up's first receive, so the next one is judged on its own.
    std::chrono::microseconds wait_after_wakeup(Clock::time_point now) {
        if (waited_ && first_datagrams_ > 0) adapt(first_datagrams_);
        const bool wait = wait_.count() > 0 && first_data_sized_ && first_datagrams_ * 4 < batch_ &&
                          now - last_delivery_ < kStreamGap;
        first_datagrams_ = 0;
        first_data_sized_ = false;
        waited_ = wait;
        return wait ? wait_ : std::chrono::microseconds(0);
    }

    // After a wake-up: waits as wait_after_wakeup() says; true when it did (for the caller's counter).
    bool linger_after_wakeup(Clock::time_point now);

    // The wait the next linger would take (for tests and stats).
    std::chrono::microseconds current_wait() const { return wait_; }

private:
    // The last wait was followed by a receive of `gathered` datagrams.
    void adapt(std::size_t gathered) {
        if (gathered < kGather) wait_ = std::min(wait_ * 2, max_);
        else if (gathered >= 2 * kGather) wait_ = std::max(wait_ / 2, floor_);
    }

    std::chrono::microseconds floor_;
    std::chrono::microseconds max_;
    std::chrono::microseconds wait_;
    bool waited_ = false;
    std::size_t batch_;
    std::size_t first_datagrams_ = 0;
    bool first_data_sized_ = false;
    Clock::time_point last_delivery_{};
};

// The client's shortest wait (the floor): 50 µs, or ESPVPN_RX_LINGER_US (0 turns it off; at most 1000).
std::chrono::microseconds client_rx_linger();

}  // namespace espvpn::datapath
