#include "src/datapath/tls/gp_https_tunnel.h"

#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "protocols/gp/https_tunnel.h"

namespace espvpn::datapath {

// tun -> GP frames -> TLS. Owns the sending half of the TLS session.
class GpHttpsSender {
public:
    GpHttpsSender(io::TunDevice& tun, gnutls_session_t session, io::TlsRecordBatcher& batcher,
                const GpHttpsDatapathOptions& o, HttpsCounters& counters)
        : batcher_(batcher), counters_(counters),
          frames_(tun, session, batcher, control, counters, o, gp::kFrameHeaderSize), tun_fd_(tun.fd()) {}

    void run() {
        batcher_.become_sender();
        for (;;) {
            if (control.stop.load(std::memory_order_acquire)) return;
            if (control.begin_handling() && !send_keepalives()) return;
            if (!drain_tun() || !flushed(frames_.flush())) return;
            if (!wait_for_work(control, tun_fd_, -1, failure)) return;
        }
    }

    ControlChannel control;
    std::atomic<std::uint32_t> keepalive_requests{0};
    PipelineFailure failure;

private:
    bool flushed(Status st) {
        if (!st && !control.stop.load(std::memory_order_acquire)) failure.set("HTTPS tunnel: " + st.error().message);
        return static_cast<bool>(st);
    }

    bool send_keepalives() {
        const std::uint32_t wanted = keepalive_requests.load(std::memory_order_acquire);
        if (wanted == keepalives_done_) return true;
        keepalives_done_ = wanted;
        if (!flushed(frames_.seal(gp::kKeepaliveFrame))) return false;
        bump(counters_.tx_keepalives);
        return flushed(frames_.flush());
    }

    // Reads the tun until it is empty; every packet becomes one record.
    bool drain_tun() {
        for (;;) {
            Result<std::size_t> got = frames_.read_tun();
            if (!got) {
                failure.set(got.error().message);
                return false;
            }
            if (*got == 0) return true;
            const Status sent = frames_.send_batch([](std::span<std::uint8_t> framed, std::span<const std::uint8_t> inner) {
                Result<gp::GpFrameHeader> header = gp::frame_header_for_packet(inner);
                if (!header) return false;
                std::memcpy(framed.data(), header->data(), gp::kFrameHeaderSize);
                return true;
            });
            if (!flushed(sent)) return false;
            if (control.pending()) {
                if (control.stop.load(std::memory_order_acquire)) return false;
                if (control.begin_handling() && !send_keepalives()) return false;
            }
        }
    }

    io::TlsRecordBatcher& batcher_;
    HttpsCounters& counters_;
    TlsFrameSender frames_;
    int tun_fd_;
    std::uint32_t keepalives_done_ = 0;
};

// TLS -> GP frames -> tun. Owns the receiving half of the TLS session.
class GpHttpsReceiver {
public:
    GpHttpsReceiver(io::TunDevice& tun, gnutls_session_t session, int fd, const GpHttpsDatapathOptions& o,
                  HttpsCounters& counters)
        : fd_(fd), counters_(counters), frames_(tun, session, counters, o, nullptr),
          decoder_(std::max(o.max_frame_payload, std::max(o.max_inner_size, o.tun_mtu))) {}

    void run() {
        for (;;) {
            if (control.stop.load(std::memory_order_acquire)) return;
            // Drained before polling: bytes read along with START_TUNNEL may already
            // wait inside GnuTLS while the socket shows nothing.
            if (!drain_tls()) return;
            if (!wait_for_work(control, fd_, -1, failure)) return;
        }
    }

    ControlChannel control;
    PipelineFailure failure;
    Timestamp last_rx;

private:
    bool delivered(Status st) {
        if (!st) failure.set(st.error().message);
        return static_cast<bool>(st);
    }

    bool drain_tls() {
        for (;;) {
            const ssize_t n = frames_.read_record();
            if (n > 0) {
                if (!take_frames(frames_.record(static_cast<std::size_t>(n)))) return false;
                if (control.stop.load(std::memory_order_relaxed)) return false;
                continue;
            }
            const bool ok = delivered(frames_.deliver());
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) return ok;
            if (!ok) return false;
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
        std::uint64_t frames = 0, keepalives = 0, not_ip = 0;
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
            if (!delivered(frames_.add_packet(payload))) {
                ok = false;
                break;
            }
        }
        if (frames || keepalives) last_rx.set(Clock::now());
        bump(counters_.rx_frames, frames);
        bump(counters_.rx_keepalives, keepalives);
        if (not_ip) bump(counters_.drop_rx_not_ip, not_ip);
        return ok;
    }

    int fd_;
    HttpsCounters& counters_;
    TlsFrameReceiver frames_;
    gp::GpFrameDecoder decoder_;
};

GpHttpsDatapath::GpHttpsDatapath() = default;

Result<std::unique_ptr<GpHttpsDatapath>> GpHttpsDatapath::start(io::TunDevice& tun, std::unique_ptr<io::TlsStream> tls,
                                                            const GpHttpsDatapathOptions& options) {
    if (!tls) return make_error("HTTPS tunnel: no TLS connection");
    auto dp = start(tun, tls->native(), tls->fd(), options);
    if (dp) (*dp)->tls_ = std::move(tls);
    return dp;
}

Result<std::unique_ptr<GpHttpsDatapath>> GpHttpsDatapath::start(io::TunDevice& tun, gnutls_session_t session, int fd,
                                                            const GpHttpsDatapathOptions& options) {
    if (options.max_inner_size < 576 || options.max_inner_size > 65535)
        return make_error("HTTPS tunnel: max inner packet size " + std::to_string(options.max_inner_size) +
                          " is outside 576..65535");
    if (options.tx_batch == 0 || options.rx_batch == 0 || options.rx_batch > 1024 || options.tx_batch > 1024)
        return make_error("HTTPS tunnel: batch sizes must be 1..1024");
    // Both threads poll; neither may block in GnuTLS.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return make_error(std::string("HTTPS tunnel: fcntl: ") + std::strerror(errno));
    std::unique_ptr<GpHttpsDatapath> dp(new GpHttpsDatapath());
    PipelinePair<GpHttpsSender, GpHttpsReceiver>& p = dp->pipes_;
    Status started = p.start("HTTPS tunnel", "tls-tx", "tls-rx", [&] {
        dp->counters_ = std::make_unique<HttpsCounters>();
        dp->batcher_ = std::make_unique<io::TlsRecordBatcher>(session, fd);
        p.tx = std::make_unique<GpHttpsSender>(tun, session, *dp->batcher_, options, *dp->counters_);
        p.rx = std::make_unique<GpHttpsReceiver>(tun, session, fd, options, *dp->counters_);
    });
    if (!started) {
        dp->batcher_.reset();
        return started.error();
    }
    return dp;
}

GpHttpsDatapath::~GpHttpsDatapath() { stop(); }

void GpHttpsDatapath::stop() {
    if (!batcher_) return;
    pipes_.stop();
    batcher_.reset();  // plain socket calls again, e.g. for the close_notify
    if (tls_) tls_->close();
}

void GpHttpsDatapath::send_keepalive() { pipes_.ask_tx(pipes_.tx->keepalive_requests); }

HttpsStats GpHttpsDatapath::stats() const { return counters_->snapshot(); }

std::chrono::steady_clock::time_point GpHttpsDatapath::last_rx() const {
    return pipes_.rx->last_rx.get();
}

std::optional<std::string> GpHttpsDatapath::failure() const { return pipes_.failure("", ""); }

}  // namespace espvpn::datapath
