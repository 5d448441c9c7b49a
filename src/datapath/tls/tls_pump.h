// TlsPump: the one packet pipeline of both TLS-framed tunnels (GP's HTTPS
// tunnel, AnyConnect's CSTP) over the tunnel's TLS session, one thread each way
// (GnuTLS allows one sender and one receiver at once):
//
//   tls-tx: tun read (TSO split) -> the carrier (DTLS) while it carries, else
//           the framing's header in the slot's headroom -> one TLS record per
//           packet, gathered, one send(); plus the control frames asked for
//           (keepalive; CSTP: DPD request/answer, the BYE)
//   tls-rx: TLS records -> the framing's decoder -> data to the tun (coalesced,
//           shared with the carrier's receive thread through deliver()); DPD
//           requests answered by tx; the server's DISCONNECT / TERMINATE end the pump
//
// The protocols differ only in their framing (TlsFraming: GP's 16-byte frame
// header and keepalive, CSTP's 8-byte header and control packets). The pump is
// the tun's one reader and writer for both AnyConnect channels. Its halves are
// in tls_framed.h; the TLS renegotiation it can run (CSTP) is in tls_rehandshake.h.
//
// Memory is fixed at start: a full TCP send buffer stalls the send thread (the
// tun queue then fills and the kernel drops), it never queues more here.
#pragma once

#include <gnutls/gnutls.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/datapath/rx_linger.h"
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

// What one TLS-framed protocol says on the wire.
class TlsFraming {
public:
    enum class Control { keepalive, dpd_request, dpd_response, logout };
    struct Frame {
        enum class Kind { data, not_ip, keepalive, dpd_request, dpd_response, end } kind;
        std::span<const std::uint8_t> payload;  // data; a DPD request's payload (valid until the next next())
        std::string end_reason;                 // end: the server's DISCONNECT / TERMINATE
    };

    virtual ~TlsFraming() = default;
    virtual std::size_t header_size() const = 0;
    // Writes the data frame header into the first header_size() bytes of
    // `framed` (`inner`, the packet, follows); false: not IP (dropped).
    virtual bool write_header(std::span<std::uint8_t> framed, std::span<const std::uint8_t> inner) const = 0;
    // One control frame; `payload`: a DPD answer's (the request's).
    virtual std::vector<std::uint8_t> control(Control what, std::span<const std::uint8_t> payload) const = 0;
    // The received stream's next frame (nullopt: all of `input` consumed); an
    // error is fatal (the stream cannot be resynchronised).
    virtual Result<std::optional<Frame>> next(std::span<const std::uint8_t>& input) = 0;
    virtual bool mid_frame() const = 0;  // bytes of an incomplete frame held
    // The payload size when `plaintext` (one record's) is exactly one whole data frame
    // of an IP packet, with no frame held in part: its payload can go to the tun where
    // it lies. 0 otherwise (next() then takes the bytes).
    virtual std::size_t whole_data_frame(std::span<const std::uint8_t> plaintext) const = 0;
};

// GP's HTTPS tunnel: 16-byte frame header, the keepalive (the gateway echoes
// it, so it doubles as DPD). Frames up to max(16384, mtu) bytes, as openconnect reads.
std::unique_ptr<TlsFraming> gp_framing(std::size_t mtu);
// The GP pump's options for a tunnel MTU of `mtu` (the tun has the same MTU).
TlsFramedOptions gp_pump_options(std::size_t mtu);
// AnyConnect's CSTP: 8-byte header, DPD, keepalive, DISCONNECT.
std::unique_ptr<TlsFraming> cstp_framing();
// The CSTP pump's options for a CSTP MTU of `mtu` (at least 576); the tun's slots hold
// at least 1500 bytes, since its MTU may be above CSTP's (set by an earlier connection).
TlsFramedOptions cstp_pump_options(int mtu);
// The client's: the same with the rx linger (client_rx_linger()).
TlsFramedOptions client_pump_options(TlsFramedOptions o);

// Why the pump ended.
enum class TlsPumpEnd { server_disconnect, connection_lost, error };

class TlsPump : public PacketSink {
public:
    using Rehandshake = TlsRehandshake::State;

    // On a connected GnuTLS session (its socket `fd`), which must outlive the pump.
    TlsPump(gnutls_session_t session, int fd, io::TunDevice& tun, std::unique_ptr<TlsFraming> framing,
            const TlsFramedOptions& options);
    ~TlsPump() override;
    TlsPump(const TlsPump&) = delete;
    TlsPump& operator=(const TlsPump&) = delete;

    // Makes the socket non-blocking (both threads poll) and starts the threads.
    // `early_bytes`: tunnel bytes that came with the reply that opened it. An
    // error (bad options, no threads) is also what ended() says.
    Status start(std::span<const std::uint8_t> early_bytes = {});
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
    std::optional<std::pair<TlsPumpEnd, std::string>> ended() const;
    Clock::time_point last_rx() const { return Clock::time_point(std::chrono::nanoseconds(last_rx_ns())); }

    TlsTunnelStats stats() const { return counters_.snapshot(); }

    // The carrier's received packets, to the tun (any thread).
    void deliver(io::PacketBatch& batch) override;

private:
    static constexpr unsigned kDpd = 1, kKeepalive = 2, kLogout = 4, kDpdAnswer = 8;
    static constexpr std::int64_t kDpdAnswerDueNs = 2 * 1000000000LL;  // a DPD answer later than this: lost

    void request(unsigned what);
    void finish(TlsPumpEnd end, std::string reason);
    bool stopping() const { return tx_control_.stop.load(std::memory_order_acquire); }

    // tx thread
    void tx_run();
    bool sent(Status st);  // false (and the pump ends) when the connection failed
    bool send_control(TlsFraming::Control what, std::span<const std::uint8_t> payload = {});
    bool handle_requests();
    bool server_quiet() const;
    void park_tx();

    // rx thread
    void rx_run();
    bool readable_now();
    bool serve_rehandshake();
    void flush_rx();
    bool on_frame(const TlsFraming::Frame& f);
    bool consume(std::span<const std::uint8_t> in);
    bool take_landed(std::size_t n);

    gnutls_session_t session_;
    int fd_;
    int tun_fd_;
    TlsTunnelCounters counters_;
    std::unique_ptr<TlsFraming> framing_;
    TlsFramedOptions options_;
    std::mutex tun_write_mutex_;
    ControlChannel tx_control_;  // wakes the tx thread (control requests, stop)
    ControlChannel rx_control_;  // wakes the rx thread (a parked tx: rehandshake due)
    io::TlsRecordBatcher batcher_;
    TlsFrameSender tx_;
    TlsFrameReceiver rx_;
    TlsRehandshake rehandshake_;
    RxLinger rx_linger_;                                  // rx thread
    std::uint64_t linger_packets_ = 0, linger_bytes_ = 0;  // rx thread: the counters at the last flush
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
    TlsPumpEnd end_ = TlsPumpEnd::error;
    std::string end_reason_;
    PipelineThreads threads_;  // last: joined before the rest goes
};

}  // namespace espvpn::datapath
