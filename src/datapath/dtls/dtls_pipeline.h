// Internals of the DTLS pipelines (dtls/send.cpp, dtls/receive.cpp) and the
// DtlsDatapath that owns them. Not for use outside src/datapath/.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "src/datapath/datapath_stats.h"
#include "src/datapath/dtls/dtls_datapath.h"
#include "src/datapath/handover_queue.h"
#include "src/datapath/pipeline_threads.h"
#include "src/datapath/rx_linger.h"
#include "src/datapath/udp_send.h"
#include "src/datapath/too_big.h"
#include "src/io/packet_batch.h"

namespace espvpn::datapath {

// A DPD request's payload, to be echoed by the tx thread (rare: allocation is fine).
struct DpdEcho {
    std::vector<std::uint8_t> payload;
};

class DtlsTxPipeline {
public:
    DtlsTxPipeline(io::TunDevice* tun, io::UdpSocket& udp, io::DtlsChannel& channel,
                   const DtlsDatapathOptions& options);
    void run();
    // Frames and sends a batch of IP packets (the caller's: the tun's reader).
    Status send_packets(io::PacketBatch& batch);

    ControlChannel control;
    HandoverQueue<DpdEcho, 16> dpd_echoes;              // from rx
    std::atomic<std::uint32_t> dpd_requests{0};         // from the control thread
    std::atomic<std::uint32_t> keepalives{0};
    DtlsTxCounters counters;
    PipelineFailure failure;

private:
    void handle_control();
    void frame(io::PacketBatch& batch);
    io::SendStatus seal_and_send(const io::PacketBatch& plain);

    io::TunDevice* tun_;
    io::UdpSocket& udp_;
    io::DtlsChannel& channel_;
    std::size_t max_inner_;
    io::PacketBatch ctrl_;  // control packets
    std::mutex seal_mutex_; // one sealer at a time: send() (the tun's reader) and this thread's control packets
    io::PacketBatch out_;   // DTLS records (guarded by seal_mutex_)
    std::uint32_t dpd_done_ = 0;
    std::uint32_t keepalives_done_ = 0;
    TooBigResponder too_big_;
};

class DtlsRxPipeline {
public:
    DtlsRxPipeline(io::UdpSocket& udp, io::DtlsChannel& channel,
                   const DtlsDatapathOptions& options, DtlsTxPipeline& tx);
    void run();

    ControlChannel control;
    DtlsRxCounters counters;
    PipelineFailure failure;
    Timestamp last_rx;
    Timestamp last_dpd_response;
    std::atomic<bool> peer_disconnected{false};
    std::atomic<bool> peer_closed{false};

private:
    bool drain_udp();
    bool open_and_deliver();
    bool deliver(Clock::time_point now);  // now: when the records were opened

    std::function<void(io::PacketBatch&)> deliver_;
    io::UdpSocket& udp_;
    io::DtlsChannel& channel_;
    DtlsTxPipeline& tx_;
    io::PacketBatch in_;   // datagrams
    io::PacketBatch out_;  // plaintext records, then inner packets for the tun
    RxLinger linger_;
};

}  // namespace espvpn::datapath
