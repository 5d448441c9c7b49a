// CstpPump: AnyConnect's CSTP packet pipeline over the tunnel's TLS session,
// one thread each way (GnuTLS allows one sender and one receiver at once):
//
//   tls-tx: tun read (TSO split) -> the carrier (DTLS) while it carries, else
//           8-byte CSTP header in the slot's headroom -> one TLS record per
//           packet, gathered, one send(); plus the control packets asked for
//           (DPD request/answer, keepalive, the BYE)
//   tls-rx: TLS records -> CstpDecoder -> data to the tun (coalesced, shared
//           with the carrier's receive thread through deliver()); DPD requests
//           answered by tx; DISCONNECT / TERMINATE end the pump
//
// The pump is the tun's one reader and writer for both AnyConnect channels.
// Its halves are shared with GP's HTTPS tunnel (tls_framed.h); the TLS
// renegotiation it can run is in tls_rehandshake.h.
#pragma once

#include <gnutls/gnutls.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/anyconnect/cstp.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/datapath/tls/tls_framed.h"
#include "src/datapath/tls/tls_rehandshake.h"
#include "src/io/packet_batch.h"
#include "src/io/tls_record_batcher.h"
#include "src/io/tun_device.h"

namespace espvpn::datapath {

// Where packets received on a second channel go: the tun, shared with the
// pump's receive thread (one lock per batch, never per packet).
class PacketSink {
public:
    virtual ~PacketSink() = default;
    // Packets need kVirtioNetHdrSize bytes of front room.
    virtual void deliver(io::PacketBatch& batch) = 0;
};

// A data carrier beside the TLS tunnel (AnyConnect's DTLS channel).
class PacketCarrier {
public:
    virtual ~PacketCarrier() = default;
    // True while data should go this way; read by the tx thread once per batch.
    virtual bool carrying() const = 0;
    // tx thread: sends every IP packet of the batch (each has >= 1 byte of front room).
    // An error makes the tunnel fall back to CSTP.
    virtual Status send(io::PacketBatch& batch) = 0;
};

// Why the pump ended.
enum class CstpEnd { server_disconnect, connection_lost, error };

class CstpPump : public PacketSink {
public:
    using Rehandshake = TlsRehandshake::State;

    // On a connected GnuTLS session (its non-blocking socket `fd`), which must
    // outlive the pump. `mtu`: the largest packet CSTP carries (larger: ICMP "too big").
    CstpPump(gnutls_session_t session, int fd, io::TunDevice& tun, int mtu);
    ~CstpPump() override;
    CstpPump(const CstpPump&) = delete;
    CstpPump& operator=(const CstpPump&) = delete;

    // `early_bytes`: tunnel bytes that came with the CONNECT reply.
    void start(const std::vector<std::uint8_t>& early_bytes);
    void stop();  // joins both threads (idempotent)

    void set_channel(PacketCarrier* channel) { channel_.store(channel); }

    // The renegotiation (tls_rehandshake.h), from the control thread.
    void request_rehandshake();
    Rehandshake rehandshake_state() const { return rehandshake_.state(); }
    void resume();
    std::int64_t rehandshake_ms() const { return rehandshake_.ms(); }
    std::int64_t rehandshake_wait_ms() const { return rehandshake_.wait_ms(); }
    std::string rehandshake_failure() const { return rehandshake_.failure(); }

    // Control requests, sent by the tx thread.
    void request_dpd() { request(kDpd); }
    void request_keepalive() { request(kKeepalive); }
    void request_logout() { request(kLogout); }
    bool logout_sent() const { return logout_sent_; }

    // now_ns() of the last record received / sent.
    std::int64_t last_rx_ns() const { return last_rx_ns_.load(std::memory_order_relaxed); }
    std::int64_t last_tx_ns() const { return last_tx_ns_.load(std::memory_order_relaxed); }
    // Set once the receive side ended (server BYE, EOF, error); says why.
    std::optional<std::pair<CstpEnd, std::string>> ended() const;

    TlsTunnelStats stats() const { return counters_.snapshot(); }

    // The carrier's received packets, to the tun (any thread).
    void deliver(io::PacketBatch& batch) override;

private:
    static constexpr unsigned kDpd = 1, kKeepalive = 2, kLogout = 4, kDpdAnswer = 8;
    static constexpr std::int64_t kDpdAnswerDueNs = 2 * 1000000000LL;  // a DPD answer later than this: lost

    void request(unsigned what);
    void finish(CstpEnd end, std::string reason);
    bool stopping() const { return tx_control_.stop.load(std::memory_order_acquire); }

    // tx thread
    void tx_run();
    bool sent(Status st);  // false (and the pump ends) when the connection failed
    bool send_control(anyconnect::CstpType type, std::span<const std::uint8_t> payload = {});
    bool handle_requests();
    bool server_quiet() const;
    void park_tx();

    // rx thread
    void rx_run();
    bool readable_now();
    bool serve_rehandshake();
    void flush_rx();
    bool on_packet(const anyconnect::CstpPacket& p);
    bool consume(std::span<const std::uint8_t> in);

    gnutls_session_t session_;
    int fd_;
    int tun_fd_;
    TlsTunnelCounters counters_;
    std::mutex tun_write_mutex_;
    ControlChannel tx_control_;  // wakes the tx thread (control requests, stop)
    ControlChannel rx_control_;  // wakes the rx thread (a parked tx: rehandshake due)
    io::TlsRecordBatcher batcher_;
    TlsFrameSender tx_;
    TlsFrameReceiver rx_;
    anyconnect::CstpDecoder decoder_;
    TlsRehandshake rehandshake_;
    std::vector<std::uint8_t> early_;
    std::atomic<unsigned> pending_{0};
    std::atomic<bool> logout_sent_{false};
    std::atomic<bool> logout_in_progress_{false};
    std::atomic<PacketCarrier*> channel_{nullptr};
    std::atomic<std::int64_t> dpd_request_ns_{0}, dpd_response_ns_{0};
    // Stamped per record sent/received: relaxed stores (a time value, read for DPD and the
    // rehandshake's quiet check; nothing else is ordered by it).
    std::atomic<std::int64_t> last_rx_ns_{0}, last_tx_ns_{0};
    static void stamp(std::atomic<std::int64_t>& at) { at.store(now_ns(), std::memory_order_relaxed); }
    std::mutex dpd_mutex_;
    std::uint8_t dpd_payload_[1600] = {};
    std::size_t dpd_payload_len_ = 0;
    mutable std::mutex end_mutex_;
    std::atomic<bool> ended_{false};
    CstpEnd end_ = CstpEnd::error;
    std::string end_reason_;
    PipelineThreads threads_;  // last: joined before the rest goes
};

}  // namespace espvpn::datapath
