// DtlsDatapath: the AnyConnect DTLS tunnel's two packet pipelines, one thread each.
//
//   tx (dtls_send.cpp):    tun read (TSO split) -> type byte 0x00 in front
//                          -> DTLS records (GnuTLS) into a batch -> sendmmsg / UDP GSO
//   rx (dtls_receive.cpp): recvmmsg / UDP GRO -> DTLS open (GnuTLS) -> type byte:
//                          data -> GRO coalesce -> tun write; DPD request -> answered
//                          by tx; DPD response / keepalive -> liveness; disconnect -> flag
//
// Usage (the session, on its control thread, after DtlsChannel::handshake()):
//   auto dp = DtlsDatapath::start(tun, udp, *channel, options);
//   anyconnect::DpdTimer dpd(settings, now);           // protocols/anyconnect/dtls_dpd.h
//   loop: dpd.on_receive(dp->liveness().last_rx); switch (dpd.poll(now)) {
//           send_dpd_request -> dp->send_dpd_request(); send_keepalive -> dp->send_keepalive();
//           peer_dead -> dp->stop(), fall back to CSTP, new DtlsChannel }
//         dp->liveness().peer_disconnected -> the server ended the session
//   dp->stop();                                         // or the destructor
//
// Session mode (options.read_tun = false): the caller keeps reading the tun on
// its own thread (e.g. the AnyConnect session's CSTP tx thread, which needs the
// packets while DTLS is down) and hands batches to send(); received data
// packets go to options.deliver instead of the tun. The tx thread then only
// sends control packets (DPD answers, requests, keepalives); a mutex taken once
// per batch keeps it and send() from sealing at the same time.
//
// The tun, the socket and the channel must outlive the DtlsDatapath; tx only
// reads the tun and seals/sends, rx only receives/opens and writes the tun.
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

#include "crypto/result.h"
#include "src/datapath/pipeline_threads.h"
#include "src/io/dtls_channel.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"

namespace espvpn::datapath {

// tun -> DTLS -> UDP
#define ESPVPN_DTLS_TX_COUNTERS(X)                                                        \
    X(tun_reads)            /* read(2) calls on the tun that returned data */             \
    X(tun_super_packets)    /* reads carrying a TSO/USO super-packet */                   \
    X(inner_packets)        /* inner packets after splitting */                           \
    X(inner_bytes)                                                                        \
    X(records)              /* DTLS records sealed (data and control) */                  \
    X(record_bytes)         /* UDP payload bytes sealed */                                \
    X(udp_sent)             /* datagrams the kernel accepted */                           \
    X(udp_send_calls)       /* sendmmsg calls */                                          \
    X(udp_gso_messages)     /* messages carrying several segments */                      \
    X(send_retries)         /* waits for socket room before resending the rest */        \
    X(dpd_requests_sent)                                                                  \
    X(dpd_responses_sent)   /* answers to the server's DPD requests */                    \
    X(keepalives_sent)                                                                    \
    X(icmp_too_big_sent)    /* ICMP frag-needed / packet-too-big written to the tun */    \
    X(drop_split)           /* tun super-packets that could not be split */               \
    X(drop_too_big)         /* inner packet larger than the tunnel MTU */                 \
    X(drop_not_ip)          /* neither IPv4 nor IPv6 */                                   \
    X(drop_seal_failed)     /* GnuTLS refused the record */                               \
    X(drop_socket_full)     /* socket send buffer still full after retries */             \
    X(drop_no_buffers)      /* ENOBUFS after retries */                                   \
    X(drop_unreachable)     /* ICMP unreachable / connection refused */                   \
    X(drop_udp_too_big)     /* EMSGSIZE */                                                \
    X(drop_send_error)      /* any other send failure */

// UDP -> DTLS -> tun
#define ESPVPN_DTLS_RX_COUNTERS(X)                                                        \
    X(udp_recv_calls)                                                                     \
    X(udp_datagrams)                                                                      \
    X(udp_bytes)                                                                          \
    X(udp_gro_buffers)      /* received buffers holding several datagrams */             \
    X(udp_peer_errors)      /* ICMP errors reported on the socket */                      \
    X(records)              /* authentic records opened */                                \
    X(inner_packets)        /* data packets delivered to the tun */                       \
    X(inner_bytes)                                                                        \
    X(tun_writes)           /* write(2) calls (after coalescing) */                       \
    X(dpd_requests)         /* from the server (answered by tx) */                        \
    X(dpd_responses)                                                                      \
    X(keepalives)                                                                         \
    X(disconnects)          /* disconnect / terminate from the server */                  \
    X(drop_truncated)       /* datagram larger than a buffer slot */                      \
    X(drop_discarded)       /* datagrams GnuTLS discarded: bad MAC, replay, not DTLS */   \
    X(drop_empty)           /* record without a type byte */                              \
    X(drop_not_ip)          /* data record that is not IPv4/IPv6 */                       \
    X(drop_compressed)      /* compressed data (never negotiated) */                      \
    X(drop_unknown_type)                                                                  \
    X(drop_dpd_backlog)     /* DPD requests not answered: the rx->tx queue was full */    \
    X(drop_tun_write)       /* the kernel refused a tun write */

struct DtlsTxStats {
#define ESPVPN_FIELD(name) std::uint64_t name = 0;
    ESPVPN_DTLS_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
};
struct DtlsRxStats {
#define ESPVPN_FIELD(name) std::uint64_t name = 0;
    ESPVPN_DTLS_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
};
struct DtlsDatapathStats {
    DtlsTxStats tx;
    DtlsRxStats rx;
    std::uint64_t drops() const;
    std::string to_json() const;  // {"tx": {...}, "rx": {...}}
    void add(const DtlsDatapathStats& other);  // every counter summed (totals over restarts)
};

struct DtlsDatapathOptions {
    // false: session mode (see above). The tun is then only written to for ICMP
    // "too big" answers, and may be absent.
    bool read_tun = true;
    // Session mode: where received data packets go (each with >= 16 bytes of
    // front room), on the rx thread. Empty: written to the tun.
    std::function<void(io::PacketBatch&)> deliver;
    std::size_t tun_mtu = 0;     // the tun's MTU if larger than the channel's tunnel MTU
    std::size_t tx_batch = 128;  // inner packets per tx batch
    std::size_t rx_batch = 64;   // datagrams per rx batch
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
    // `tun` may be null only in session mode with a deliver function.
    static Result<std::unique_ptr<DtlsDatapath>> start(io::TunDevice* tun, io::UdpSocket& udp,
                                                       io::DtlsChannel& channel, const DtlsDatapathOptions& options);
    ~DtlsDatapath();
    DtlsDatapath(const DtlsDatapath&) = delete;
    DtlsDatapath& operator=(const DtlsDatapath&) = delete;

    void stop();  // joins both threads (idempotent)

    // Session mode, from one caller thread: puts the data type byte into each
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
    std::unique_ptr<DtlsTxPipeline> tx_;
    std::unique_ptr<DtlsRxPipeline> rx_;
    PipelineThreads threads_;  // after the pipelines: joined before they are destroyed
    bool stopped_ = false;
};

}  // namespace espvpn::datapath
