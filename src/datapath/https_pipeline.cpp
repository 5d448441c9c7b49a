#include "src/datapath/https_pipeline.h"

#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstring>

#include "protocols/gp/https_tunnel.h"
#include "src/datapath/pipeline.h"

namespace espvpn::datapath {

namespace {
constexpr std::size_t kMaxRecordPayload = 16384;      // TLS plaintext record limit
constexpr std::size_t kWireBufferSize = 512 * 1024;   // sealed records waiting for one send()
constexpr std::size_t kWireFlushSize = 256 * 1024;    // send once this much is sealed
constexpr int kStalledPollMs = 100;                   // wake to check stop / the stall limit
constexpr std::size_t kRxSlotCapacity = 65535;        // a frame, or coalesced TCP segments for one tun write

std::int64_t now_rep() { return Clock::now().time_since_epoch().count(); }

// GnuTLS's own socket functions take the fd cast to a transport pointer.
gnutls_transport_ptr_t fd_as_transport(int fd) {
    return reinterpret_cast<gnutls_transport_ptr_t>(static_cast<std::intptr_t>(fd));
}
}  // namespace

// tun -> frames -> TLS. Owns the sending half of the TLS session.
//
// One TLS record per frame, as openconnect and the official client send (and
// openconnect expects: it takes each record it reads as one frame). So that
// this costs no syscall per packet, GnuTLS seals records into `wire_` (our
// push function) and the batch goes to the socket with one send().
class HttpsSender {
public:
    HttpsSender(io::TunDevice& tun, gnutls_session_t session, int fd, const HttpsDatapathOptions& o,
                HttpsCounters& counters)
        : tun_(tun), session_(session), fd_(fd), options_(o), counters_(counters),
          batch_(io::PacketBatchShape{o.tx_batch, std::max(o.max_inner_size, o.tun_mtu), gp::kFrameHeaderSize, 0}),
          wire_(new std::uint8_t[kWireBufferSize]) {
        gnutls_transport_set_ptr2(session_, fd_as_transport(fd_), this);
        gnutls_transport_set_vec_push_function(session_, &HttpsSender::push);
    }

    void run() {
        owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
        pollfd fds[2] = {{tun_.fd(), POLLIN, 0}, {control.fd(), POLLIN, 0}};
        for (;;) {
            if (control.stop.load(std::memory_order_acquire)) return;
            if (control.begin_handling() && !send_keepalives()) return;
            if (!drain_tun() || !flush_wire()) return;
            if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
                failure.set(std::string("HTTPS send: poll: ") + std::strerror(errno));
                return;
            }
            if (fds[1].revents & POLLIN) control.drain();
        }
    }

    // After the thread has stopped: records (e.g. close_notify) go straight to
    // the socket again, with no pointer to this object left in the session.
    void write_through() {
        gnutls_transport_set_ptr2(session_, fd_as_transport(fd_), fd_as_transport(fd_));
        gnutls_transport_set_vec_push_function(session_, &HttpsSender::writev_fd);
    }

    ControlChannel control;
    std::atomic<std::uint32_t> keepalive_requests{0};
    PipelineFailure failure;

private:
    static ssize_t push(gnutls_transport_ptr_t self, const giovec_t* iov, int count) {
        return static_cast<HttpsSender*>(self)->take_records(iov, count);
    }
    static ssize_t writev_fd(gnutls_transport_ptr_t fd, const giovec_t* iov, int count) {
        return ::writev(static_cast<int>(reinterpret_cast<std::intptr_t>(fd)), iov, count);
    }

    // GnuTLS's push: sealed records into wire_ (full: EAGAIN, and the caller
    // flushes and repeats the send).
    ssize_t take_records(const giovec_t* iov, int count) {
        // GnuTLS may answer from the receive thread (a TLS 1.3 key update): straight out, not into wire_.
        if (std::this_thread::get_id() != owner_.load(std::memory_order_relaxed)) return ::writev(fd_, iov, count);
        std::size_t total = 0;
        for (int i = 0; i < count; ++i) total += iov[i].iov_len;
        if (wire_len_ + total > kWireBufferSize) {
            errno = EAGAIN;
            gnutls_transport_set_errno(session_, EAGAIN);
            return -1;
        }
        for (int i = 0; i < count; ++i) {
            std::memcpy(wire_.get() + wire_len_, iov[i].iov_base, iov[i].iov_len);
            wire_len_ += iov[i].iov_len;
        }
        return static_cast<ssize_t>(total);
    }

    bool send_keepalives() {
        const std::uint32_t wanted = keepalive_requests.load(std::memory_order_acquire);
        if (wanted == keepalives_done_) return true;
        keepalives_done_ = wanted;
        if (!seal_record(gp::kKeepaliveFrame)) return false;
        bump(counters_.tx_keepalives);
        return flush_wire();
    }

    // Reads the tun until it is empty; every packet becomes one record.
    bool drain_tun() {
        for (;;) {
            Result<std::size_t> got = tun_.read_packets(batch_);
            if (!got) {
                failure.set(got.error().message);
                return false;
            }
            // The read-side fields are this thread's; the tun's totals include earlier datapaths.
            const io::TunCounters& t = tun_.counters();
            mirror(counters_.tx_tun_reads, t.reads - at_start_.reads);
            mirror(counters_.tx_super_packets, t.super_packets - at_start_.super_packets);
            mirror(counters_.drop_tx_split, t.split_drop_total() - at_start_.split_drop_total());
            if (batch_.size() == 0) return true;
            const bool ok = frame_batch();
            batch_.clear();
            if (!ok) return false;
            if (control.pending()) {
                if (control.stop.load(std::memory_order_acquire)) return false;
                if (control.begin_handling() && !send_keepalives()) return false;
            }
        }
    }

    bool frame_batch() {
        std::uint64_t packets = 0, bytes = 0, too_big = 0, not_ip = 0;
        for (std::size_t i = 0; i < batch_.size(); ++i) {
            std::span<const std::uint8_t> pkt = batch_.packet(i);
            if (pkt.size() > options_.max_inner_size) {
                ++too_big;
                continue;
            }
            Result<gp::GpFrameHeader> header = gp::frame_header_for_packet(pkt);
            if (!header) {
                ++not_ip;
                continue;
            }
            // The header goes into the slot's headroom: header + packet is one record.
            (void)batch_.grow_front(i, gp::kFrameHeaderSize);
            std::span<std::uint8_t> framed = batch_.packet(i);
            std::memcpy(framed.data(), header->data(), gp::kFrameHeaderSize);
            if (!seal_record(framed)) return false;
            ++packets;
            bytes += pkt.size();
            if (wire_len_ >= kWireFlushSize && !flush_wire()) return false;
        }
        bump(counters_.tx_packets, packets);
        bump(counters_.tx_bytes, bytes);
        if (too_big) bump(counters_.drop_tx_too_big, too_big);
        if (not_ip) bump(counters_.drop_tx_not_ip, not_ip);
        return true;
    }

    // gnutls_record_send of one frame (a record; two only for frames beyond
    // 16 KiB), flushing wire_ whenever it is full.
    bool seal_record(std::span<const std::uint8_t> frame) {
        std::size_t off = 0;
        while (off < frame.size()) {
            const ssize_t n = gnutls_record_send(session_, frame.data() + off, frame.size() - off);
            if (n > 0) {
                off += static_cast<std::size_t>(n);
                bump(counters_.tx_tls_records);
                bump(counters_.tx_tls_bytes, static_cast<std::uint64_t>(n));
                continue;
            }
            if (n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED) {
                failure.set(std::string("HTTPS send: ") + gnutls_strerror(static_cast<int>(n)));
                return false;
            }
            // wire_ is full: send it, then repeat the same call (GnuTLS keeps the record).
            if (!flush_wire()) return false;
        }
        return true;
    }

    // Sends wire_ to the socket; waits for room in the TCP send buffer
    // (back-pressure to the tun) up to the stall limit.
    bool flush_wire() {
        std::size_t off = 0;
        Clock::time_point stalled_since{};
        while (off < wire_len_) {
            const ssize_t n = ::send(fd_, wire_.get() + off, wire_len_ - off, MSG_NOSIGNAL);
            if (n > 0) {
                off += static_cast<std::size_t>(n);
                stalled_since = {};
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                const bool closed = errno == EPIPE || errno == ECONNRESET;
                failure.set(std::string(closed ? "the gateway closed the HTTPS tunnel (send: " : "HTTPS send: (") +
                            std::strerror(errno) + ")");
                return false;
            }
            if (control.stop.load(std::memory_order_acquire)) return false;
            const Clock::time_point now = Clock::now();
            if (stalled_since == Clock::time_point{}) stalled_since = now;
            if (now - stalled_since > options_.write_stall_limit) {
                const auto stalled = std::chrono::duration_cast<std::chrono::seconds>(now - stalled_since);
                failure.set("HTTPS send: the gateway has not taken data for " + std::to_string(stalled.count()) + " s");
                return false;
            }
            bump(counters_.tx_write_waits);
            pollfd fds[2] = {{fd_, POLLOUT, 0}, {control.fd(), POLLIN, 0}};
            (void)::poll(fds, 2, kStalledPollMs);
            if (fds[1].revents & POLLIN) control.drain();  // stop is checked above; a keepalive waits
        }
        wire_len_ = 0;
        return true;
    }

    io::TunDevice& tun_;
    gnutls_session_t session_;
    int fd_;
    HttpsDatapathOptions options_;
    HttpsCounters& counters_;
    io::PacketBatch batch_;
    std::unique_ptr<std::uint8_t[]> wire_;
    std::size_t wire_len_ = 0;
    std::atomic<std::thread::id> owner_{};  // the send thread, once it runs
    std::uint32_t keepalives_done_ = 0;
    io::TunCounters at_start_ = tun_.counters();
};

// TLS -> frames -> tun. Owns the receiving half of the TLS session.
class HttpsReceiver {
public:
    HttpsReceiver(io::TunDevice& tun, gnutls_session_t session, int fd, const HttpsDatapathOptions& o,
                  HttpsCounters& counters)
        : tun_(tun), session_(session), fd_(fd), counters_(counters),
          batch_(io::PacketBatchShape{o.rx_batch, kRxSlotCapacity, 16, 0}),
          decoder_(std::max(o.max_frame_payload, std::max(o.max_inner_size, o.tun_mtu))),
          in_(new std::uint8_t[kMaxRecordPayload]) {}

    void run() {
        pollfd fds[2] = {{fd_, POLLIN, 0}, {control.fd(), POLLIN, 0}};
        for (;;) {
            if (control.stop.load(std::memory_order_acquire)) return;
            // Drained before polling: bytes read along with START_TUNNEL may already
            // wait inside GnuTLS while the socket shows nothing.
            if (!drain_tls()) return;
            if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
                failure.set(std::string("HTTPS receive: poll: ") + std::strerror(errno));
                return;
            }
            if (fds[1].revents & POLLIN) control.drain();
        }
    }

    ControlChannel control;
    PipelineFailure failure;
    std::atomic<Clock::rep> last_rx{0};

private:
    bool drain_tls() {
        for (;;) {
            const ssize_t n = gnutls_record_recv(session_, in_.get(), kMaxRecordPayload);
            if (n > 0) {
                bump(counters_.rx_tls_reads);
                bump(counters_.rx_tls_bytes, static_cast<std::uint64_t>(n));
                if (!take_frames({in_.get(), static_cast<std::size_t>(n)})) return false;
                if (control.stop.load(std::memory_order_relaxed)) return false;
                continue;
            }
            const bool delivered = deliver();
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) return delivered;
            if (!delivered) return false;
            if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
                failure.set(decoder_.pending() ? "the gateway closed the HTTPS tunnel in the middle of a frame"
                                               : "the gateway closed the HTTPS tunnel");
                return false;
            }
            if (!gnutls_error_is_fatal(static_cast<int>(n))) continue;  // e.g. a TLS 1.3 session ticket
            failure.set(std::string("HTTPS receive: ") + gnutls_strerror(static_cast<int>(n)));
            return false;
        }
    }

    bool take_frames(std::span<const std::uint8_t> input) {
        std::uint64_t frames = 0, keepalives = 0, bytes = 0, too_big = 0, not_ip = 0;
        bool ok = true;
        for (;;) {
            auto frame = decoder_.next(input);
            if (!frame) {
                failure.set(frame.error().message);
                ok = false;
                break;
            }
            if (!*frame) break;
            if ((*frame)->type == gp::GpFrameType::Keepalive) {
                ++keepalives;
                continue;
            }
            ++frames;
            std::span<const std::uint8_t> payload = (*frame)->payload;
            const unsigned version = payload[0] >> 4;
            if (version != ((*frame)->type == gp::GpFrameType::Ipv4 ? 4u : 6u)) {
                ++not_ip;
                continue;
            }
            if (batch_.full() && !deliver()) {
                ok = false;
                break;
            }
            std::span<std::uint8_t> room = batch_.next_room();
            if (payload.size() > room.size()) {
                ++too_big;
                continue;
            }
            std::memcpy(room.data(), payload.data(), payload.size());
            batch_.commit(payload.size());
            bytes += payload.size();
        }
        if (frames || keepalives) last_rx.store(now_rep(), std::memory_order_relaxed);
        bump(counters_.rx_frames, frames);
        bump(counters_.rx_keepalives, keepalives);
        bump(counters_.rx_bytes, bytes);
        if (too_big) bump(counters_.drop_rx_too_big, too_big);
        if (not_ip) bump(counters_.drop_rx_not_ip, not_ip);
        return ok;
    }

    bool deliver() {
        if (batch_.size() == 0) return true;
        const std::size_t packets = batch_.size();
        Result<std::size_t> writes = tun_.write_packets(batch_);
        batch_.clear();
        if (!writes) {
            failure.set(writes.error().message);
            return false;
        }
        bump(counters_.rx_packets, packets);
        bump(counters_.rx_tun_writes, *writes);
        mirror(counters_.drop_rx_tun_write, tun_.counters().write_errors - write_errors_at_start_);
        return true;
    }

    io::TunDevice& tun_;
    gnutls_session_t session_;
    int fd_;
    HttpsCounters& counters_;
    io::PacketBatch batch_;
    gp::GpFrameDecoder decoder_;
    std::unique_ptr<std::uint8_t[]> in_;
    // The tun's counters outlive this datapath (ESP wrote before): count from here.
    std::uint64_t write_errors_at_start_ = tun_.counters().write_errors;
};

HttpsDatapath::HttpsDatapath() = default;

Result<std::unique_ptr<HttpsDatapath>> HttpsDatapath::start(io::TunDevice& tun, std::unique_ptr<io::TlsStream> tls,
                                                            const HttpsDatapathOptions& options) {
    if (!tls) return make_error("HTTPS tunnel: no TLS connection");
    auto dp = start(tun, tls->native(), tls->fd(), options);
    if (dp) (*dp)->tls_ = std::move(tls);
    return dp;
}

Result<std::unique_ptr<HttpsDatapath>> HttpsDatapath::start(io::TunDevice& tun, gnutls_session_t session, int fd,
                                                            const HttpsDatapathOptions& options) {
    if (options.max_inner_size < 576 || options.max_inner_size > 65535)
        return make_error("HTTPS tunnel: max inner packet size " + std::to_string(options.max_inner_size) +
                          " is outside 576..65535");
    if (options.tx_batch == 0 || options.rx_batch == 0 || options.rx_batch > 1024 || options.tx_batch > 1024)
        return make_error("HTTPS tunnel: batch sizes must be 1..1024");
    // Both threads poll; neither may block in GnuTLS.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return make_error(std::string("HTTPS tunnel: fcntl: ") + std::strerror(errno));
    std::unique_ptr<HttpsDatapath> dp(new HttpsDatapath());
    try {
        dp->counters_ = std::make_unique<HttpsCounters>();
        dp->tx_ = std::make_unique<HttpsSender>(tun, session, fd, options, *dp->counters_);
        dp->rx_ = std::make_unique<HttpsReceiver>(tun, session, fd, options, *dp->counters_);
        dp->threads_.start(dp->tx_->control, [p = dp->tx_.get()] { p->run(); },
                           dp->rx_->control, [p = dp->rx_.get()] { p->run(); });
    } catch (const std::exception& e) {
        dp->stop();
        return make_error(std::string("HTTPS tunnel: cannot start: ") + e.what());
    }
    return dp;
}

HttpsDatapath::~HttpsDatapath() { stop(); }

void HttpsDatapath::stop() {
    if (stopped_) return;
    stopped_ = true;
    threads_.stop();
    if (tx_) tx_->write_through();
    if (tls_) tls_->close();
}

void HttpsDatapath::send_keepalive() {
    if (stopped_) return;
    tx_->keepalive_requests.fetch_add(1, std::memory_order_release);
    tx_->control.notify();
}

HttpsStats HttpsDatapath::stats() const { return counters_->snapshot(); }

std::chrono::steady_clock::time_point HttpsDatapath::last_rx() const {
    return Clock::time_point(Clock::duration(rx_->last_rx.load(std::memory_order_relaxed)));
}

std::optional<std::string> HttpsDatapath::failure() const {
    if (auto f = tx_->failure.get()) return *f;
    if (auto f = rx_->failure.get()) return *f;
    return std::nullopt;
}

}  // namespace espvpn::datapath
