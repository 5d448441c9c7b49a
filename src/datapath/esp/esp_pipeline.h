// Internals of the ESP pipelines (send.cpp, receive.cpp) and the EspDatapath that
// owns them. Not for use outside src/datapath/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "protocols/esp/esp_sa.h"
#include "src/datapath/esp/esp_datapath.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/handover_queue.h"
#include "src/datapath/rx_linger.h"
#include "src/datapath/too_big.h"
#include "src/datapath/tun_counts.h"
#include "src/datapath/udp_send.h"
#include "src/io/packet_batch.h"

namespace espvpn::datapath {

// What the rx pipeline tells the tx pipeline.
struct EspRxToTx {
    std::atomic<std::uint32_t> last_authentic_spi{0};     // deferred outbound switch
    HandoverQueue<io::SocketAddress> peer_updates;         // learn_peer: where to send now
};

struct OutboundUpdate {
    EspOutboundSa sa;
    std::optional<std::uint32_t> peer_spi;  // switch once the peer uses this inbound SPI
};

class EspTxPipeline {
public:
    EspTxPipeline(io::TunDevice& tun, io::UdpSocket& udp, const EspDatapathOptions& options, EspRxToTx& from_rx);
    void run();

    ControlChannel control;
    HandoverQueue<OutboundUpdate> sa_updates;
    std::atomic<std::uint32_t> probe_requests{0};
    EspTxCounters counters;
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
    EspDatapathOptions options_;
    EspRxToTx& from_rx_;
    io::PacketBatch batch_;
    // The packets of batch_ to seal (one per slot, made once) and their slots.
    std::unique_ptr<EspOutboundSa::Item[]> seal_items_;
    std::unique_ptr<std::size_t[]> seal_slots_;
    std::optional<EspOutboundSa> sa_;
    std::unique_ptr<OutboundUpdate> deferred_;
    Clock::time_point deferred_since_;
    bool have_peer_ = false;
    std::uint32_t probes_done_ = 0;
    std::uint16_t probe_seq_ = 0;
    TooBigResponder too_big_;
    TunCountsSince tun_since_;
};

class EspRxPipeline {
public:
    EspRxPipeline(io::TunDevice& tun, io::UdpSocket& udp, const EspDatapathOptions& options, EspRxToTx& to_tx);
    void run();

    ControlChannel control;
    HandoverQueue<EspInboundSa> sa_updates;
    EspRxCounters counters;
    PipelineFailure failure;
    Timestamp last_rx;
    Timestamp last_probe_reply;

private:
    void handle_control();
    bool drain_udp();
    bool open_and_deliver();
    void retire_previous(Clock::time_point now);
    int poll_timeout_ms(Clock::time_point now) const;
    void publish_sa_state();

    io::TunDevice& tun_;
    io::UdpSocket& udp_;
    EspDatapathOptions options_;
    EspRxToTx& to_tx_;
    io::PacketBatch batch_;
    std::unique_ptr<io::SocketAddress[]> sources_;
    std::unique_ptr<EspOpenItem[]> open_items_;  // one per datagram of batch_, made once
    io::SocketAddress peer_;
    EspInboundSas sas_;
    Clock::time_point previous_since_;
    TunCountsSince tun_since_;
    RxLinger linger_;
};

}  // namespace espvpn::datapath
