// Internals shared by the tx and rx pipeline threads (send.cpp, receive.cpp)
// and the Datapath that owns them. Not for use outside src/datapath/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "protocols/esp/esp_sa.h"
#include "src/datapath/datapath.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/handover_queue.h"
#include "src/io/packet_batch.h"

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

// What the rx pipeline tells the tx pipeline.
struct RxToTx {
    std::atomic<std::uint32_t> last_authentic_spi{0};     // deferred outbound switch
    HandoverQueue<io::SocketAddress> peer_updates;         // learn_peer: where to send now
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

struct OutboundUpdate {
    EspOutboundSa sa;
    std::optional<std::uint32_t> peer_spi;  // switch once the peer uses this inbound SPI
};

class TxPipeline {
public:
    TxPipeline(io::TunDevice& tun, io::UdpSocket& udp, const DatapathOptions& options, RxToTx& from_rx);
    void run();

    ControlChannel control;
    HandoverQueue<OutboundUpdate> sa_updates;
    std::atomic<std::uint32_t> probe_requests{0};
    TxCounters counters;
    PipelineFailure failure;

private:
    void handle_control();
    void take_updates(Clock::time_point now);
    bool drain_tun();
    void seal_and_send(bool probes);
    void send_all();
    void wait_for_room(io::SendStatus why);
    void answer_too_big(std::span<const std::uint8_t> packet);
    void send_probes();
    void activate(EspOutboundSa sa);
    void publish_sa_state();

    io::TunDevice& tun_;
    io::UdpSocket& udp_;
    DatapathOptions options_;
    RxToTx& from_rx_;
    io::PacketBatch batch_;
    std::optional<EspOutboundSa> sa_;
    std::unique_ptr<OutboundUpdate> deferred_;
    Clock::time_point deferred_since_;
    bool have_peer_ = false;
    std::uint32_t probes_done_ = 0;
    std::uint16_t probe_seq_ = 0;
    std::unique_ptr<std::uint8_t[]> too_big_buf_;
    Clock::time_point too_big_window_;
    unsigned too_big_in_window_ = 0;
};

class RxPipeline {
public:
    RxPipeline(io::TunDevice& tun, io::UdpSocket& udp, const DatapathOptions& options, RxToTx& to_tx);
    void run();

    ControlChannel control;
    HandoverQueue<EspInboundSa> sa_updates;
    RxCounters counters;
    PipelineFailure failure;
    std::atomic<Clock::rep> last_rx{0};
    std::atomic<Clock::rep> last_probe_reply{0};

private:
    void handle_control();
    bool drain_udp();
    bool open_and_deliver();
    void retire_previous(Clock::time_point now);
    int poll_timeout_ms(Clock::time_point now) const;
    void publish_sa_state();

    io::TunDevice& tun_;
    io::UdpSocket& udp_;
    DatapathOptions options_;
    RxToTx& to_tx_;
    io::PacketBatch batch_;
    std::unique_ptr<io::SocketAddress[]> sources_;
    io::SocketAddress peer_;
    EspInboundSas sas_;
    Clock::time_point previous_since_;
};

}  // namespace espvpn::datapath
