// Internals of the ESP pipelines (send.cpp, receive.cpp) and the Datapath that
// owns them, and the UDP send helpers ESP and DTLS share. Not for use outside src/datapath/.
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
#include "src/datapath/too_big.h"
#include "src/datapath/tun_counts.h"
#include "src/io/packet_batch.h"

namespace espvpn::datapath {

// What the rx pipeline tells the tx pipeline.
struct RxToTx {
    std::atomic<std::uint32_t> last_authentic_spi{0};     // deferred outbound switch
    HandoverQueue<io::SocketAddress> peer_updates;         // learn_peer: where to send now
};

// Sends batch[0, size) on udp with back-pressure: when the socket is full it
// waits for room (or for the control channel) and resends the rest, at most
// kMaxSendWaits times per batch; then what is left is dropped and counted.
// Returns the worst failure seen (unreachable / error), else ok. Counters: a
// tx counter struct with send_retries and the UDP send fields (ESP or DTLS).
inline constexpr int kMaxSendWaits = 100;
void wait_for_send_room(const io::UdpSocket& udp, ControlChannel& control, io::SendStatus why);

template <class Counters>
io::SendStatus send_with_back_pressure(io::UdpSocket& udp, const io::PacketBatch& batch, ControlChannel& control,
                                       Counters& counters) {
    io::SendStatus worst = io::SendStatus::ok;
    std::size_t first = 0;
    for (int waits = 0; batch.size() > 0; ++waits) {
        const io::SendOutcome sent = udp.send_batch(batch, first);
        if (sent.status == io::SendStatus::unreachable || sent.status == io::SendStatus::error) worst = sent.status;
        const bool full = sent.status == io::SendStatus::would_block || sent.status == io::SendStatus::no_buffers;
        if (!full || sent.next >= batch.size()) break;
        if (waits >= kMaxSendWaits || control.stop.load(std::memory_order_relaxed)) {
            udp.count_send_drops(sent.status, batch.size() - sent.next);
            break;
        }
        bump(counters.send_retries);
        wait_for_send_room(udp, control, sent.status);
        first = sent.next;
    }
    return worst;
}

// The socket's send-side counters (kept by this thread) into the thread's stats.
template <class Counters>
void mirror_send_counters(const io::UdpCounters& u, Counters& c) {
    mirror(c.udp_sent, u.sent);
    mirror(c.udp_send_calls, u.send_calls);
    mirror(c.udp_gso_messages, u.gso_messages);
    mirror(c.drop_socket_full, u.drop_would_block);
    mirror(c.drop_no_buffers, u.drop_no_buffers);
    mirror(c.drop_unreachable, u.drop_unreachable);
    mirror(c.drop_udp_too_big, u.drop_too_big);
    mirror(c.drop_send_error, u.drop_other);
}

// The socket's receive-side counters (kept by this thread) into the thread's stats.
template <class Counters>
void mirror_receive_counters(const io::UdpCounters& u, Counters& c) {
    mirror(c.udp_recv_calls, u.receive_calls);
    mirror(c.udp_gro_buffers, u.gro_buffers);
    mirror(c.udp_peer_errors, u.peer_errors);
    mirror(c.drop_truncated, u.drop_truncated);
}

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
    TooBigResponder too_big_;
    TunCountsSince tun_since_;
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
    TunCountsSince tun_since_;
};

}  // namespace espvpn::datapath
