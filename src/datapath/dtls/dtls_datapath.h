// DtlsDatapath: the AnyConnect DTLS tunnel's two packet pipelines, one thread each.
//
//   tx (dtls/send.cpp):    send(batch) from the tun's reader -> type byte 0x00 in front
//                          -> DTLS records (GnuTLS) into a batch -> sendmmsg / UDP GSO;
//                          its thread sends the control packets (DPD, keepalive)
//   rx (dtls/receive.cpp): recvmmsg / UDP GRO -> DTLS open (GnuTLS) -> type byte:
//                          data -> options.deliver (the tun's owner); DPD request -> answered
//                          by tx; DPD response / keepalive -> liveness; disconnect -> flag
//
// The session drives it from DtlsChannel::handshake() on: send() from the tun's
// reader, DPD by a DpdTimer over liveness() (protocols/tunnel/dpd_timer.h), stop().
//
// One tun reader for both AnyConnect channels: the CSTP pump's tx thread reads
// the tun (it needs the packets while DTLS is down) and hands batches to send();
// received data packets go to options.deliver. The tx thread only sends control
// packets (DPD answers, requests, keepalives); a mutex taken once per batch
// keeps it and send() from sealing at the same time.
//
// The socket and the channel must outlive the DtlsDatapath.
// No allocation, lock or syscall per packet (GnuTLS itself allocates a record
// buffer per record: see docs/PERFORMANCE.md).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "protocols/base/result.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/io/dtls_channel.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"

namespace espvpn::datapath {

struct DtlsDatapathStats {
    DtlsTxStats tx;
    DtlsRxStats rx;
    std::uint64_t drops() const;
    std::string to_json() const;  // {"tx": {...}, "rx": {...}}
    void add(const DtlsDatapathStats& other);  // every counter summed (totals over restarts)
};

struct DtlsDatapathOptions {
    // Where received data packets go (each with >= 16 bytes of front room), on
    // the rx thread: the owner of the tun (AnyConnect: the CSTP pump).
    std::function<void(io::PacketBatch&)> deliver;
    std::size_t tx_batch = 128;  // records per sendmmsg (larger batches from send() go in rounds)
    std::size_t rx_batch = 64;   // datagrams per rx batch
    // How long the rx thread waits after a wake-up while a download arrives one datagram at
    // a time (rx_linger.h; the client's is client_rx_linger()); zero: never.
    std::chrono::microseconds rx_linger{0};
    unsigned icmp_too_big_per_second = 100;
};

// When the rx pipeline last saw signs of life (steady clock; epoch = never).
struct DtlsLiveness {
    std::chrono::steady_clock::time_point last_rx;            // any authentic record
    std::chrono::steady_clock::time_point last_dpd_response;
    bool peer_disconnected = false;                           // disconnect/terminate received
    bool peer_closed = false;                                 // DTLS close_notify
};

class DtlsTxPipeline;
class DtlsRxPipeline;

class DtlsDatapath {
public:
    // `tun` (may be null) is only written to for ICMP "too big" answers.
    static Result<std::unique_ptr<DtlsDatapath>> start(io::TunDevice* tun, io::UdpSocket& udp,
                                                       io::DtlsChannel& channel, const DtlsDatapathOptions& options);
    ~DtlsDatapath();
    DtlsDatapath(const DtlsDatapath&) = delete;
    DtlsDatapath& operator=(const DtlsDatapath&) = delete;

    void stop();  // joins both threads (idempotent)

    // From one caller thread (the tun's reader): puts the data type byte into each
    // IP packet's front room (>= 1 byte), seals and sends the batch (the
    // batch's packets are changed). Oversized and non-IP packets are dropped
    // and counted. An error (peer unreachable, socket error) means: fall back
    // to CSTP.
    Status send(io::PacketBatch& batch);

    // Ask the tx thread to send one DPD request / keepalive (control thread).
    void send_dpd_request();
    void send_keepalive();

    DtlsDatapathStats stats() const;
    DtlsLiveness liveness() const;
    // Empty while both threads run; the reason when one stopped on an error.
    std::optional<std::string> failure() const;

private:
    DtlsDatapath();
    PipelinePair<DtlsTxPipeline, DtlsRxPipeline> pipes_;
};

}  // namespace espvpn::datapath
