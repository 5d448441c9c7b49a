// The CSTP data path of an AnyConnect tunnel: a tx thread (tun -> CSTP
// frames, plus the control packets the control thread asks for) and an rx
// thread (CSTP frames -> tun, DPD answered), over the tunnel's TLS session,
// with the records of a batch gathered into one send().
// Used by ac_tunnel.cpp only; the classes live here to keep that file about the session.
#pragma once

#include <gnutls/gnutls.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocols/anyconnect/cstp.h"
#include "src/io/packet_batch.h"
#include "src/io/tls_stream.h"
#include "src/io/tun_device.h"
#include "src/log/logger.h"
#include "src/session/anyconnect/tunnel.h"
#include "src/session/reconnect_policy.h"

namespace espvpn::session::cstp {

using anyconnect::CstpType;

inline constexpr int kPollMs = 100;
inline constexpr std::size_t kRxSlotCapacity = 65535;  // a packet, or coalesced TCP segments for one tun write

// The CSTP channel's counters (data packets only in tx/rx; control counted apart).
struct CstpStats {
    std::uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0, drop_rx = 0;
    std::uint64_t dpd_requests_sent = 0, dpd_answered = 0, keepalives_sent = 0;
};

inline std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// CSTP sends one TLS record per packet; written one by one that is a send()
// per packet, and GnuTLS reads a record in two recv() calls. This transport
// sits under the GnuTLS session while the tunnel runs: records written while
// corked are gathered and leave in one send(); reads take whatever the socket
// has (many records) and hand it to GnuTLS piece by piece.
class BatchingTransport {
public:
    BatchingTransport(gnutls_session_t session, int fd, const std::atomic<bool>& stopping)
        : session_(session), fd_(fd), stopping_(stopping), out_(new std::uint8_t[kOutSize]),
          in_(new std::uint8_t[kInSize]) {
        gnutls_transport_set_ptr(session_, this);
        gnutls_transport_set_push_function(session_, push);
        gnutls_transport_set_pull_function(session_, pull);
    }
    ~BatchingTransport() {
        // Back to plain socket calls for whatever the session still sends (close_notify).
        gnutls_transport_set_int(session_, fd_);
        gnutls_transport_set_push_function(session_, plain_push);
        gnutls_transport_set_pull_function(session_, plain_pull);
    }
    BatchingTransport(const BatchingTransport&) = delete;
    BatchingTransport& operator=(const BatchingTransport&) = delete;

    // tx thread: gather records from now on / send what was gathered.
    void cork() { corked_ = true; }
    bool uncork() {
        corked_ = false;
        return flush();
    }
    // rx thread: bytes read from the socket that GnuTLS has not taken yet.
    bool has_readahead() const { return in_off_ < in_len_; }

private:
    static constexpr std::size_t kOutSize = 256 * 1024;
    static constexpr std::size_t kInSize = 256 * 1024;

    static ssize_t plain_push(gnutls_transport_ptr_t p, const void* data, std::size_t n) {
        return send(static_cast<int>(reinterpret_cast<std::intptr_t>(p)), data, n, MSG_NOSIGNAL);
    }
    static ssize_t plain_pull(gnutls_transport_ptr_t p, void* data, std::size_t n) {
        return recv(static_cast<int>(reinterpret_cast<std::intptr_t>(p)), data, n, 0);
    }

    static ssize_t push(gnutls_transport_ptr_t p, const void* data, std::size_t n) {
        auto* t = static_cast<BatchingTransport*>(p);
        if (!t->corked_ || n > kOutSize) {
            if (!t->flush()) {
                errno = EPIPE;
                return -1;
            }
            return send(t->fd_, data, n, MSG_NOSIGNAL);
        }
        if (t->out_len_ + n > kOutSize && !t->flush()) {
            errno = EPIPE;
            return -1;
        }
        std::memcpy(t->out_.get() + t->out_len_, data, n);
        t->out_len_ += n;
        return static_cast<ssize_t>(n);
    }

    static ssize_t pull(gnutls_transport_ptr_t p, void* data, std::size_t n) {
        auto* t = static_cast<BatchingTransport*>(p);
        if (t->in_off_ == t->in_len_) {
            ssize_t r = recv(t->fd_, t->in_.get(), kInSize, 0);
            if (r <= 0) return r;  // errno tells GnuTLS EAGAIN from a failure
            t->in_off_ = 0;
            t->in_len_ = static_cast<std::size_t>(r);
        }
        std::size_t k = std::min(n, t->in_len_ - t->in_off_);
        std::memcpy(data, t->in_.get() + t->in_off_, k);
        t->in_off_ += k;
        return static_cast<ssize_t>(k);
    }

    // Writes everything gathered, waiting for room (until the tunnel stops).
    bool flush() {
        std::size_t off = 0;
        while (off < out_len_) {
            ssize_t r = send(fd_, out_.get() + off, out_len_ - off, MSG_NOSIGNAL);
            if (r > 0) {
                off += static_cast<std::size_t>(r);
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR) && !stopping_) {
                pollfd w{fd_, POLLOUT, 0};
                poll(&w, 1, kPollMs);
                continue;
            }
            out_len_ = 0;
            return false;
        }
        out_len_ = 0;
        return true;
    }

    gnutls_session_t session_;
    int fd_;
    const std::atomic<bool>& stopping_;
    std::unique_ptr<std::uint8_t[]> out_, in_;
    std::size_t out_len_ = 0;
    std::size_t in_off_ = 0, in_len_ = 0;
    bool corked_ = false;
};

// The CSTP packet pump over the tunnel's TLS session: the tx thread is the
// only writer (data from the tun, and the control packets others ask for), the
// rx thread the only reader. GnuTLS allows one sender and one receiver at once.
class CstpPump : public AcPacketSink {
public:
    CstpPump(io::TlsStream& tls, io::TunDevice& tun, int mtu)
        : tls_(tls), session_(tls.native()), tun_(tun),
          tx_batch_(io::PacketBatchShape{64, static_cast<std::size_t>(std::max(mtu, 1280)),
                                         anyconnect::kCstpHeaderSize + 8, 0}),
          rx_batch_(io::PacketBatchShape{64, kRxSlotCapacity, 16, 0}),
          rx_buf_(new std::uint8_t[kRxBufSize]), transport_(session_, tls.fd(), stopping_) {
        wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        rx_wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        last_rx_ns_ = last_tx_ns_ = now_ns();
    }
    ~CstpPump() override {
        stop();
        if (wake_fd_ >= 0) close(wake_fd_);
        if (rx_wake_fd_ >= 0) close(rx_wake_fd_);
    }

    void start(const std::vector<std::uint8_t>& early_bytes) {
        early_.assign(early_bytes.begin(), early_bytes.end());
        tx_ = std::thread([this] { tx_loop(); });
        rx_ = std::thread([this] { rx_loop(); });
    }
    void stop() {
        stopping_ = true;
        wake();
        if (tx_.joinable()) tx_.join();
        if (rx_.joinable()) rx_.join();
    }

    void set_channel(AcDataChannel* channel) { channel_.store(channel); }

    // CSTP rekey "ssl" (doc 6): the live TLS session renegotiates (TLS 1.2; a
    // KeyUpdate on TLS 1.3). GnuTLS allows no record I/O beside a handshake, so
    // the tx thread parks and the rx thread runs it; both stay parked after a
    // success until resume(), so the caller can export a fresh DTLS PSK and swap
    // the channel while nobody touches the session.
    //
    // A GnuTLS client gives its renegotiation up when a record of application
    // data arrives before the ServerHello (gnutls_handshake: GOT_APPLICATION_DATA,
    // its state back at the start), yet the server answers the hello it got: a
    // second hello then breaks the connection. So the hello leaves only once the
    // server has been silent on this connection for kQuietNs with no DPD answer
    // due, and after everything already received has been read; if that moment
    // does not come within kQuietWaitNs the pump declines (nothing broken: the
    // caller opens a new tunnel instead). A failed handshake ends the pump
    // (connection_lost) with the reason.
    enum class Rehandshake { idle, requested, tx_parked, done, failed, declined };
    void request_rehandshake() {
        rehandshake_requested_ns_ = now_ns();
        int idle = static_cast<int>(Rehandshake::idle);
        if (rehandshake_.compare_exchange_strong(idle, static_cast<int>(Rehandshake::requested))) wake();
    }
    Rehandshake rehandshake_state() const { return static_cast<Rehandshake>(rehandshake_.load()); }
    // After done: both threads continue. After declined: back to idle.
    void resume() {
        rehandshake_ = static_cast<int>(Rehandshake::idle);
        wake();
    }
    std::int64_t rehandshake_ms() const { return rehandshake_ms_; }
    // How long the last rehandshake waited for the server to pause (see Rehandshake).
    std::int64_t rehandshake_wait_ms() const { return (tx_parked_ns_ - rehandshake_requested_ns_) / 1000000; }
    // Why the last rehandshake failed or was declined.
    std::string rehandshake_failure() const {
        std::lock_guard<std::mutex> lock(end_mutex_);
        return rehandshake_failure_;
    }

    // Control requests, sent by the tx thread.
    void request_dpd() { request(kDpd); }
    void request_keepalive() { request(kKeepalive); }
    void request_logout() { request(kLogout); }
    bool logout_sent() const { return logout_sent_; }

    std::int64_t last_rx_ns() const { return last_rx_ns_; }
    std::int64_t last_tx_ns() const { return last_tx_ns_; }
    // Set once the receive side ended (server BYE, EOF, error); says why.
    std::optional<std::pair<AcTunnelEnd, std::string>> ended() const {
        if (!ended_) return std::nullopt;
        std::lock_guard<std::mutex> lock(end_mutex_);
        return std::make_pair(end_, end_reason_);
    }

    CstpStats stats() const {
        CstpStats s;
        s.tx_packets = tx_packets_;
        s.tx_bytes = tx_bytes_;
        s.rx_packets = rx_packets_;
        s.rx_bytes = rx_bytes_;
        s.drop_rx = rx_dropped_;
        s.dpd_requests_sent = dpd_sent_;
        s.dpd_answered = dpd_answered_;
        s.keepalives_sent = keepalives_sent_;
        return s;
    }

    void deliver(io::PacketBatch& batch) override {
        std::lock_guard<std::mutex> lock(tun_write_mutex_);
        if (auto w = tun_.write_packets(batch); !w) LOG_DEBUG << "tun write: " << w.error().message;
    }

private:
    static constexpr std::size_t kRxBufSize = 16384 + 2048;  // one TLS record
    static constexpr unsigned kDpd = 1, kKeepalive = 2, kLogout = 4, kDpdAnswer = 8;
    static constexpr std::int64_t kQuietNs = 100 * 1000000LL;         // server silent this long: hello may go
    static constexpr std::int64_t kQuietWaitNs = 5 * 1000000000LL;    // ... waited for at most this long
    static constexpr std::int64_t kDpdAnswerDueNs = 2 * 1000000000LL; // a DPD answer later than this: lost

    void request(unsigned what) {
        pending_.fetch_or(what);
        wake();
    }
    void wake() {
        std::uint64_t one = 1;
        [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
    }
    void finish(AcTunnelEnd end, std::string reason) {
        std::lock_guard<std::mutex> lock(end_mutex_);
        if (ended_) return;
        end_ = end;
        end_reason_ = std::move(reason);
        ended_ = true;
    }

    // One packet = one TLS record; waits (bounded by stop) while the socket is full.
    bool send_record(const std::uint8_t* p, std::size_t n) {
        for (;;) {
            ssize_t r = gnutls_record_send(session_, p, n);
            if (r >= 0) {
                last_tx_ns_ = now_ns();
                return true;
            }
            if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) {
                finish(AcTunnelEnd::connection_lost,
                       std::string("sending on the TLS connection failed: ") + gnutls_strerror(static_cast<int>(r)));
                return false;
            }
            if (stopping_) return false;
            pollfd w{tls_.fd(), POLLOUT, 0};
            poll(&w, 1, kPollMs);
        }
    }

    bool send_control(CstpType type, std::span<const std::uint8_t> payload = {}) {
        std::uint8_t buf[anyconnect::kCstpHeaderSize + 1600];
        std::size_t n = std::min(payload.size(), sizeof buf - anyconnect::kCstpHeaderSize);
        anyconnect::write_cstp_header(type, static_cast<std::uint16_t>(n), buf);
        if (n) std::memcpy(buf + anyconnect::kCstpHeaderSize, payload.data(), n);
        return send_record(buf, anyconnect::kCstpHeaderSize + n);
    }

    void handle_requests() {
        // A DPD request now would draw an answer into the renegotiation's way: it waits.
        const bool hold_dpd = rehandshake_state() == Rehandshake::requested;
        unsigned what = pending_.fetch_and(hold_dpd ? kDpd : 0u);  // a held request stays pending
        if (hold_dpd) what &= ~kDpd;
        if (what & kDpdAnswer) {
            std::uint8_t copy[1600];
            std::size_t n;
            {
                std::lock_guard<std::mutex> lock(dpd_mutex_);
                n = dpd_payload_len_;
                std::memcpy(copy, dpd_payload_, n);
            }
            if (send_control(CstpType::dpd_response, {copy, n})) ++dpd_answered_;
        }
        if ((what & kDpd) && send_control(CstpType::dpd_request)) {
            ++dpd_sent_;
            dpd_request_ns_ = now_ns();
        }
        if ((what & kKeepalive) && send_control(CstpType::keepalive)) ++keepalives_sent_;
        if (what & kLogout) {
            auto bye = anyconnect::cstp_logout_packet("Aborted by caller");
            if (send_record(bye.data(), bye.size())) logout_sent_ = true;
        }
    }

    void tx_loop() {
        pollfd fds[2] = {{tun_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        while (!stopping_) {
            if (poll(fds, 2, kPollMs) < 0 && errno != EINTR) break;
            if (fds[1].revents & POLLIN) {
                std::uint64_t v;
                [[maybe_unused]] auto n = read(wake_fd_, &v, sizeof v);
            }
            if (rehandshake_state() == Rehandshake::requested) {
                if (server_quiet()) {
                    park_tx();
                    continue;
                }
                if (now_ns() - rehandshake_requested_ns_ > kQuietWaitNs) decline_rehandshake(kQuietWaitNs);
            }
            handle_requests();
            if (stopping_) break;
            if (!(fds[0].revents & POLLIN)) continue;
            // Drain the tun in batches, each leaving in one send(); control requests
            // get a turn between batches.
            for (int rounds = 0; rounds < 16 && !stopping_; ++rounds) {
                if (!transport_.uncork()) {
                    finish(AcTunnelEnd::connection_lost, "sending on the TLS connection failed");
                    return;
                }
                transport_.cork();
                tx_batch_.clear();
                auto got = tun_.read_packets(tx_batch_);
                if (!got) {
                    finish(AcTunnelEnd::error, "tun read: " + got.error().message);
                    return;
                }
                if (*got == 0) break;
                AcDataChannel* channel = channel_.load();
                if (channel && channel->carrying()) {
                    // A failure stops the channel carrying (it logs why); this batch is lost.
                    (void)channel->send(tx_batch_);
                    continue;
                }
                for (std::size_t i = 0; i < tx_batch_.size(); ++i) {
                    std::size_t len = tx_batch_.length(i);
                    if (!tx_batch_.grow_front(i, anyconnect::kCstpHeaderSize)) continue;
                    auto pkt = tx_batch_.packet(i);
                    anyconnect::write_cstp_header(CstpType::data, static_cast<std::uint16_t>(len), pkt.data());
                    if (!send_record(pkt.data(), pkt.size())) return;
                    ++tx_packets_;
                    tx_bytes_ += len;
                }
                handle_requests();
            }
            if (!transport_.uncork()) {
                finish(AcTunnelEnd::connection_lost, "sending on the TLS connection failed");
                return;
            }
        }
    }

    // tx thread: nothing received for kQuietNs and no DPD answer due (see Rehandshake).
    bool server_quiet() const {
        const std::int64_t t = now_ns();
        const std::int64_t asked = dpd_request_ns_;
        const bool answer_due = asked > dpd_response_ns_ && t - asked < kDpdAnswerDueNs;
        return !answer_due && t - last_rx_ns_ >= kQuietNs;
    }
    // `waited_ns`: how long the server kept sending (the tx thread waits up to kQuietWaitNs for a
    // pause, the rx thread's draining after it parked up to a fifth of that).
    void decline_rehandshake(std::int64_t waited_ns) {
        {
            std::lock_guard<std::mutex> lock(end_mutex_);
            rehandshake_failure_ = "the server kept sending on the TLS connection for " +
                                   ReconnectPolicy::seconds_text(std::chrono::nanoseconds(waited_ns)) +
                                   " (a renegotiation needs a pause in its data)";
        }
        rehandshake_ = static_cast<int>(Rehandshake::declined);
    }

    // tx thread: hands the session to the rx thread until the rehandshake is over.
    void park_tx() {
        if (!transport_.uncork()) {
            finish(AcTunnelEnd::connection_lost, "sending on the TLS connection failed");
            rehandshake_ = static_cast<int>(Rehandshake::failed);
            return;
        }
        tx_parked_ns_ = now_ns();
        rehandshake_ = static_cast<int>(Rehandshake::tx_parked);
        // The rx thread may sit in poll(): it starts the handshake now, not after its timeout.
        std::uint64_t one = 1;
        [[maybe_unused]] auto n = write(rx_wake_fd_, &one, sizeof one);
        wait_while_rehandshaking();
    }
    void wait_while_rehandshaking() {
        pollfd w{wake_fd_, POLLIN, 0};
        // After a failure the session is unusable: stay parked until stop(). Declined
        // (no handshake began): carry on.
        while (!stopping_ && rehandshake_state() != Rehandshake::idle &&
               rehandshake_state() != Rehandshake::declined) {
            if (poll(&w, 1, 20) > 0) {
                std::uint64_t v;
                [[maybe_unused]] auto n = read(wake_fd_, &v, sizeof v);
            }
        }
    }

    // rx thread, tx parked: the handshake, bounded in time. Application data the
    // server sent before it saw our hello is read and delivered meanwhile.
    bool rehandshake(std::string& why) {
        const std::int64_t t0 = now_ns();
        const std::int64_t deadline = t0 + std::int64_t{15} * 1000000000;
        if (gnutls_protocol_get_version(session_) == GNUTLS_TLS1_3) {
            // No renegotiation in TLS 1.3: new traffic keys both ways instead.
            for (;;) {
                int r = gnutls_session_key_update(session_, GNUTLS_KU_PEER);
                if (r == 0) break;
                if ((r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) || now_ns() > deadline) {
                    why = std::string("TLS 1.3 key update failed: ") + gnutls_strerror(r);
                    return false;
                }
                pollfd w{tls_.fd(), POLLOUT, 0};
                poll(&w, 1, kPollMs);
            }
            rehandshake_ms_ = (now_ns() - t0) / 1000000;
            return true;
        }
        for (;;) {
            int r = gnutls_handshake(session_);
            if (r == 0) break;
            if (r == GNUTLS_E_GOT_APPLICATION_DATA) {
                // GnuTLS has given this renegotiation up, the server has not (see
                // Rehandshake): another hello would break the connection. The data
                // still goes to the tun; the caller opens a new tunnel.
                ssize_t n = gnutls_record_recv(session_, rx_buf_.get(), kRxBufSize);
                if (n > 0 && consume({rx_buf_.get(), static_cast<std::size_t>(n)})) flush_rx();
                why = "the server sent data before answering the renegotiation (GnuTLS then abandons it)";
                return false;
            } else if (r == GNUTLS_E_WARNING_ALERT_RECEIVED) {
                if (gnutls_alert_get(session_) == GNUTLS_A_NO_RENEGOTIATION) {
                    why = "the server refused the TLS renegotiation";
                    return false;
                }
            } else if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) {
                why = std::string("TLS rehandshake failed: ") + gnutls_strerror(r);
                return false;
            } else if (!transport_.has_readahead()) {
                pollfd w{tls_.fd(), static_cast<short>(gnutls_record_get_direction(session_) ? POLLOUT : POLLIN), 0};
                poll(&w, 1, kPollMs);
            }
            if (stopping_) {
                why = "stopped";
                return false;
            }
            if (now_ns() > deadline) {
                why = "TLS rehandshake: no answer within 15 s";
                return false;
            }
        }
        last_rx_ns_ = now_ns();
        rehandshake_ms_ = (now_ns() - t0) / 1000000;
        return true;
    }

    // rx thread: records wait in GnuTLS, the read-ahead or the socket.
    bool readable_now() {
        if (gnutls_record_check_pending(session_) > 0 || transport_.has_readahead()) return true;
        pollfd r{tls_.fd(), POLLIN, 0};
        return poll(&r, 1, 0) > 0;
    }

    // rx thread: runs a parked rehandshake; false when the pump ends.
    bool serve_rehandshake() {
        if (rehandshake_state() != Rehandshake::tx_parked) return true;
        std::string why;
        if (!rehandshake(why)) {
            {
                std::lock_guard<std::mutex> lock(end_mutex_);
                rehandshake_failure_ = why;
            }
            finish(AcTunnelEnd::connection_lost, why);
            rehandshake_ = static_cast<int>(Rehandshake::failed);
            wake();
            return false;
        }
        rehandshake_ = static_cast<int>(Rehandshake::done);
        pollfd w{-1, 0, 0};
        while (!stopping_ && rehandshake_state() == Rehandshake::done) poll(&w, 0, 5);
        return !stopping_;
    }

    void flush_rx() {
        if (rx_batch_.size() == 0) return;
        deliver(rx_batch_);
        rx_batch_.clear();
    }

    // Returns false when the tunnel ends.
    bool on_packet(const anyconnect::CstpPacket& p) {
        switch (p.type) {
            case CstpType::data: {
                if (p.payload.empty()) return true;
                if (rx_batch_.full()) flush_rx();
                auto room = rx_batch_.next_room();
                if (p.payload.size() > room.size()) {
                    ++rx_dropped_;
                    return true;
                }
                std::memcpy(room.data(), p.payload.data(), p.payload.size());
                rx_batch_.commit(p.payload.size());
                ++rx_packets_;
                rx_bytes_ += p.payload.size();
                return true;
            }
            case CstpType::dpd_request: {
                {
                    std::lock_guard<std::mutex> lock(dpd_mutex_);
                    dpd_payload_len_ = std::min(p.payload.size(), sizeof dpd_payload_);
                    std::memcpy(dpd_payload_, p.payload.data(), dpd_payload_len_);
                }
                request(kDpdAnswer);
                return true;
            }
            case CstpType::dpd_response: dpd_response_ns_ = now_ns(); return true;
            case CstpType::keepalive: return true;
            case CstpType::disconnect: {
                std::string text;
                if (p.payload.size() > 1)
                    text.assign(reinterpret_cast<const char*>(p.payload.data()) + 1, p.payload.size() - 1);
                finish(AcTunnelEnd::server_disconnect,
                       "the server sent DISCONNECT" + (text.empty() ? std::string() : ": " + text));
                return false;
            }
            case CstpType::terminate:
                finish(AcTunnelEnd::server_disconnect, "the server sent TERMINATE (shutting down)");
                return false;
            case CstpType::compressed_data: break;  // refused by the decoder
        }
        return true;
    }

    bool consume(std::span<const std::uint8_t> in) {
        while (true) {
            auto p = decoder_.next(in);
            if (!p) {
                finish(AcTunnelEnd::error, p.error().message);
                return false;
            }
            if (!*p) return true;
            if (!on_packet(**p)) return false;
        }
    }

    void rx_loop() {
        if (!early_.empty() && !consume(early_)) return;
        pollfd r[2] = {{tls_.fd(), POLLIN, 0}, {rx_wake_fd_, POLLIN, 0}};
        while (!stopping_) {
            // Everything already received is read before the renegotiation's hello leaves
            // (bounded: the tx thread waits meanwhile).
            if (rehandshake_state() == Rehandshake::tx_parked) {
                if (!readable_now()) {
                    if (!serve_rehandshake()) break;
                } else if (now_ns() - tx_parked_ns_ > kQuietWaitNs / 5) {
                    decline_rehandshake(kQuietWaitNs / 5);
                }
            }
            if (gnutls_record_check_pending(session_) == 0 && !transport_.has_readahead()) {
                flush_rx();
                if (poll(r, 2, kPollMs) < 0 && errno != EINTR) break;
                if (r[1].revents & POLLIN) {
                    std::uint64_t v;
                    [[maybe_unused]] auto n = read(rx_wake_fd_, &v, sizeof v);
                    continue;
                }
                if (!(r[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            }
            ssize_t n = gnutls_record_recv(session_, rx_buf_.get(), kRxBufSize);
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_REHANDSHAKE) continue;
            if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
                if (!stopping_) finish(AcTunnelEnd::connection_lost, "the server closed the TLS connection");
                break;
            }
            if (n < 0) {
                if (!stopping_)
                    finish(AcTunnelEnd::connection_lost,
                           std::string("the TLS connection failed: ") + gnutls_strerror(static_cast<int>(n)));
                break;
            }
            last_rx_ns_ = now_ns();
            if (!consume({rx_buf_.get(), static_cast<std::size_t>(n)})) break;
        }
        flush_rx();
    }

    io::TlsStream& tls_;
    gnutls_session_t session_;
    io::TunDevice& tun_;
    io::PacketBatch tx_batch_;
    io::PacketBatch rx_batch_;
    std::unique_ptr<std::uint8_t[]> rx_buf_;
    std::atomic<bool> stopping_{false};
    BatchingTransport transport_;
    anyconnect::CstpDecoder decoder_;
    std::vector<std::uint8_t> early_;  // tunnel bytes that came with the CONNECT reply
    int wake_fd_ = -1;     // wakes the tx thread (control requests, stop)
    int rx_wake_fd_ = -1;  // wakes the rx thread (a parked tx: rehandshake due)
    std::thread tx_, rx_;
    std::atomic<unsigned> pending_{0};
    std::atomic<bool> logout_sent_{false};
    std::atomic<AcDataChannel*> channel_{nullptr};
    std::atomic<int> rehandshake_{static_cast<int>(Rehandshake::idle)};
    std::atomic<std::int64_t> rehandshake_ms_{0};
    std::atomic<std::int64_t> rehandshake_requested_ns_{0}, tx_parked_ns_{0};
    std::atomic<std::int64_t> dpd_request_ns_{0}, dpd_response_ns_{0};
    std::string rehandshake_failure_;  // under end_mutex_
    std::atomic<std::int64_t> last_rx_ns_{0}, last_tx_ns_{0};
    std::mutex dpd_mutex_;
    std::uint8_t dpd_payload_[1600] = {};
    std::size_t dpd_payload_len_ = 0;
    std::mutex tun_write_mutex_;
    mutable std::mutex end_mutex_;
    std::atomic<bool> ended_{false};
    AcTunnelEnd end_ = AcTunnelEnd::error;
    std::string end_reason_;
    std::atomic<std::uint64_t> tx_packets_{0}, tx_bytes_{0}, rx_packets_{0}, rx_bytes_{0}, rx_dropped_{0},
        dpd_answered_{0}, dpd_sent_{0}, keepalives_sent_{0};
};

}  // namespace espvpn::session::cstp
