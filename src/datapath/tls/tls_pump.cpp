#include "src/datapath/tls/tls_pump.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "protocols/anyconnect/cstp.h"
#include "protocols/base/byte_order.h"
#include "protocols/gp/https_tunnel.h"
#include "src/log/logger.h"

namespace espvpn::datapath {

using anyconnect::CstpType;
using Kind = TlsFraming::Frame::Kind;
using Control = TlsFraming::Control;

namespace {
constexpr int kPollMs = 100;

using Frame = TlsFraming::Frame;
using NextFrame = Result<std::optional<Frame>>;
NextFrame frame(Kind kind, std::span<const std::uint8_t> payload = {}, std::string end_reason = {}) {
    return std::optional<Frame>(Frame{kind, payload, std::move(end_reason)});
}

class GpFraming final : public TlsFraming {
public:
    explicit GpFraming(std::size_t max_payload) : max_payload_(max_payload), decoder_(max_payload) {}
    std::size_t header_size() const override { return gp::kFrameHeaderSize; }
    bool write_header(std::span<std::uint8_t> framed, std::span<const std::uint8_t> inner) const override {
        Result<gp::GpFrameHeader> header = gp::frame_header_for_packet(inner);
        if (!header) return false;
        std::memcpy(framed.data(), header->data(), gp::kFrameHeaderSize);
        return true;
    }
    std::vector<std::uint8_t> control(Control what, std::span<const std::uint8_t>) const override {
        if (what != Control::keepalive) return {};  // GP has no other
        return {gp::kKeepaliveFrame.begin(), gp::kKeepaliveFrame.end()};
    }
    NextFrame next(std::span<const std::uint8_t>& input) override {
        auto f = decoder_.next(input);
        if (!f) return f.error();
        if (!*f) return std::optional<Frame>{};
        if ((*f)->type == gp::GpFrameType::Keepalive) return frame(Kind::keepalive);
        // The frame's type must agree with the packet's IP version.
        const std::span<const std::uint8_t> payload = (*f)->payload;
        const unsigned version = (*f)->type == gp::GpFrameType::Ipv4 ? 4u : 6u;
        return frame(payload.empty() || payload[0] >> 4 != version ? Kind::not_ip : Kind::data, payload);
    }
    bool mid_frame() const override { return decoder_.pending() != 0; }
    std::size_t whole_data_frame(std::span<const std::uint8_t> pt) const override {
        if (pt.size() <= gp::kFrameHeaderSize || mid_frame()) return 0;
        auto info = gp::decode_frame_header(pt.first<gp::kFrameHeaderSize>());
        if (!info || info->type == gp::GpFrameType::Keepalive || info->payload_len > max_payload_ ||
            info->payload_len != pt.size() - gp::kFrameHeaderSize)
            return 0;
        const unsigned version = info->type == gp::GpFrameType::Ipv4 ? 4u : 6u;
        return pt[gp::kFrameHeaderSize] >> 4 == version ? info->payload_len : 0;
    }

private:
    std::size_t max_payload_;
    gp::GpFrameDecoder decoder_;
};

class CstpFraming final : public TlsFraming {
public:
    std::size_t header_size() const override { return anyconnect::kCstpHeaderSize; }
    bool write_header(std::span<std::uint8_t> framed, std::span<const std::uint8_t> inner) const override {
        anyconnect::write_cstp_header(CstpType::data, static_cast<std::uint16_t>(inner.size()), framed.data());
        return true;
    }
    std::vector<std::uint8_t> control(Control what, std::span<const std::uint8_t> payload) const override {
        if (what == Control::logout) return anyconnect::cstp_logout_packet("Aborted by caller");
        const CstpType type = what == Control::keepalive     ? CstpType::keepalive
                              : what == Control::dpd_request ? CstpType::dpd_request
                                                             : CstpType::dpd_response;
        const std::size_t n = std::min(payload.size(), anyconnect::kCstpMaxPayload);
        std::vector<std::uint8_t> packet(anyconnect::kCstpHeaderSize + n);
        anyconnect::write_cstp_header(type, static_cast<std::uint16_t>(n), packet.data());
        std::copy_n(payload.begin(), n, packet.begin() + anyconnect::kCstpHeaderSize);
        return packet;
    }
    NextFrame next(std::span<const std::uint8_t>& input) override {
        auto p = decoder_.next(input);
        if (!p) return p.error();
        if (!*p) return std::optional<Frame>{};
        const std::span<const std::uint8_t> payload = (*p)->payload;
        switch ((*p)->type) {
            case CstpType::data: return frame(Kind::data, payload);
            case CstpType::dpd_request: return frame(Kind::dpd_request, payload);
            case CstpType::dpd_response: return frame(Kind::dpd_response);
            case CstpType::keepalive: return frame(Kind::keepalive);
            case CstpType::disconnect: {
                std::string text;
                if (payload.size() > 1) text.assign(reinterpret_cast<const char*>(payload.data()) + 1, payload.size() - 1);
                return frame(Kind::end, {}, "the server sent DISCONNECT" + (text.empty() ? std::string() : ": " + text));
            }
            case CstpType::terminate: return frame(Kind::end, {}, "the server sent TERMINATE (shutting down)");
            case CstpType::compressed_data: break;  // refused by the decoder
        }
        return frame(Kind::data);  // not reached; empty data is skipped
    }
    bool mid_frame() const override { return decoder_.pending() != 0; }
    std::size_t whole_data_frame(std::span<const std::uint8_t> pt) const override {
        // "STF" 1, length, type data, 0 (what the decoder checks), filling the record.
        constexpr std::size_t h = anyconnect::kCstpHeaderSize;
        if (pt.size() <= h || mid_frame() || decoder_.failed()) return 0;
        if (pt[0] != 'S' || pt[1] != 'T' || pt[2] != 'F' || pt[3] != 1 || pt[7] != 0 ||
            pt[6] != static_cast<std::uint8_t>(CstpType::data))
            return 0;
        const std::size_t len = load_be16(pt.data() + 4);
        return len == pt.size() - h && len <= anyconnect::kCstpMaxPayload ? len : 0;
    }

private:
    anyconnect::CstpDecoder decoder_;
};
}  // namespace

std::unique_ptr<TlsFraming> gp_framing(std::size_t mtu) {
    return std::make_unique<GpFraming>(std::max<std::size_t>(16384, mtu));
}

TlsFramedOptions gp_pump_options(std::size_t mtu) {
    TlsFramedOptions o;
    o.max_inner_size = o.tun_mtu = mtu;
    return o;
}

std::unique_ptr<TlsFraming> cstp_framing() { return std::make_unique<CstpFraming>(); }

TlsFramedOptions client_pump_options(TlsFramedOptions o) {
    o.rx_linger = client_rx_linger();
    return o;
}

TlsFramedOptions cstp_pump_options(int mtu) {
    TlsFramedOptions o;
    o.max_inner_size = static_cast<std::size_t>(std::max(mtu, 576));
    o.tun_mtu = std::max<std::size_t>(o.max_inner_size, 1500);
    return o;
}

TlsPump::TlsPump(gnutls_session_t session, int fd, io::TunDevice& tun, std::unique_ptr<TlsFraming> framing,
                 const TlsFramedOptions& options)
    : session_(session), fd_(fd), tun_fd_(tun.fd()), framing_(std::move(framing)), options_(options),
      batcher_(session_, fd), tx_(tun, session_, batcher_, tx_control_, counters_, options, framing_->header_size()),
      rx_(tun, batcher_, counters_, options, &tun_write_mutex_), rx_linger_(options.rx_linger, options.rx_batch) {
    stamp(last_rx_ns_);
    stamp(last_tx_ns_);
}

TlsPump::~TlsPump() { stop(); }

Status TlsPump::start(std::span<const std::uint8_t> early_bytes) {
    const auto failed = [this](std::string why) {
        why = "TLS tunnel: " + why;
        finish(TlsPumpEnd::error, why);
        return make_error(why);
    };
    if (options_.max_inner_size < 576 || options_.max_inner_size > 65535)
        return failed("max inner packet size " + std::to_string(options_.max_inner_size) + " is outside 576..65535");
    if (options_.tx_batch == 0 || options_.rx_batch == 0 || options_.rx_batch > 1024 || options_.tx_batch > 1024)
        return failed("batch sizes must be 1..1024");
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) < 0) return failed(std::string("fcntl: ") + std::strerror(errno));
    early_.assign(early_bytes.begin(), early_bytes.end());
    try {
        threads_.start("tls-tx", tx_control_, [this] { tx_run(); }, "tls-rx", rx_control_, [this] { rx_run(); },
                       [this](bool, const std::string& why) { finish(TlsPumpEnd::error, "TLS tunnel: " + why); });
    } catch (const std::exception& e) {
        return failed(std::string("cannot start: ") + e.what());
    }
    return {};
}

void TlsPump::stop() { threads_.stop(); }

void TlsPump::request_rehandshake() {
    if (rehandshake_.request()) tx_control_.notify();
}

void TlsPump::resume() {
    rehandshake_.resume();
    tx_control_.notify();
}

std::optional<std::pair<TlsPumpEnd, std::string>> TlsPump::ended() const {
    if (!ended_ || logout_in_progress_) return std::nullopt;
    std::lock_guard<std::mutex> lock(end_mutex_);
    return std::make_pair(end_, end_reason_);
}

void TlsPump::deliver(io::PacketBatch& batch) {
    if (auto w = rx_.write_tun(batch); !w) LOG_DEBUG << "tun write: " << w.error().message;
}

void TlsPump::request(unsigned what) {
    pending_.fetch_or(what);
    tx_control_.notify();
}

void TlsPump::finish(TlsPumpEnd end, std::string reason) {
    std::lock_guard<std::mutex> lock(end_mutex_);
    if (ended_) return;
    end_ = end;
    end_reason_ = std::move(reason);
    ended_ = true;
}

bool TlsPump::sent(Status st) {
    if (st) {
        stamp(last_tx_ns_);
        return true;
    }
    if (!stopping()) finish(TlsPumpEnd::connection_lost, "sending on the TLS connection failed: " + st.error().message);
    return false;
}

bool TlsPump::send_control(Control what, std::span<const std::uint8_t> payload) {
    return sent(tx_.seal(framing_->control(what, payload)));
}

// Between batches: the control packets asked for. False when the connection failed.
bool TlsPump::handle_requests() {
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
        if (!send_control(Control::dpd_response, {copy, n})) return false;
        bump(counters_.tx_dpd_responses);
    }
    if (what & kDpd) {
        if (!send_control(Control::dpd_request)) return false;
        bump(counters_.tx_dpd_requests);
        dpd_request_ns_ = now_ns();
    }
    if (what & kKeepalive) {
        if (!send_control(Control::keepalive)) return false;
        bump(counters_.tx_keepalives);
    }
    if (what & kLogout) {
        // The server closes the connection once it has the BYE: ended() waits for
        // logout_sent_, or the caller would take that close for a lost BYE.
        logout_in_progress_ = true;
        const bool ok = send_control(Control::logout) && sent(tx_.flush());
        logout_sent_ = ok;
        logout_in_progress_ = false;
        if (!ok) return false;
    }
    return true;
}

void TlsPump::tx_run() {
    batcher_.become_sender();
    pollfd fds[2] = {{tun_fd_, POLLIN, 0}, {tx_control_.fd(), POLLIN, 0}};
    const auto write_header = [this](std::span<std::uint8_t> framed, std::span<const std::uint8_t> inner) {
        return framing_->write_header(framed, inner);
    };
    while (!stopping()) {
        if (::poll(fds, 2, kPollMs) < 0 && errno != EINTR) break;
        if (fds[1].revents & POLLIN) tx_control_.drain();
        if (rehandshake_state() == Rehandshake::requested) {
            if (server_quiet()) {
                park_tx();
                continue;
            }
            if (rehandshake_.waited_too_long(now_ns())) rehandshake_.decline(TlsRehandshake::kQuietWaitNs);
        }
        if (!handle_requests()) return;
        if (stopping()) break;
        if (fds[0].revents & POLLIN) {
            // Drain the tun in batches, each packet one record; control requests
            // get a turn between batches; what is gathered leaves at the end.
            for (int rounds = 0; rounds < 16 && !stopping(); ++rounds) {
                Result<std::size_t> got = tx_.read_tun();
                if (!got) {
                    finish(TlsPumpEnd::error, "tun read: " + got.error().message);
                    return;
                }
                if (*got == 0) break;
                PacketCarrier* channel = channel_.load();
                if (channel && channel->carrying()) {
                    // A failure stops the channel carrying (it logs why); this batch is lost.
                    (void)channel->send(tx_.batch());
                    continue;
                }
                if (!sent(tx_.send_batch(write_header)) || !handle_requests()) return;
            }
        }
        if (batcher_.gathered() && !sent(tx_.flush())) return;
    }
}

// tx thread: nothing received for kQuietNs and no DPD answer due (see tls_rehandshake.h).
bool TlsPump::server_quiet() const {
    const std::int64_t t = now_ns();
    const std::int64_t asked = dpd_request_ns_;
    const bool answer_due = asked > dpd_response_ns_ && t - asked < kDpdAnswerDueNs;
    return !answer_due && t - last_rx_ns() >= TlsRehandshake::kQuietNs;
}

// tx thread: hands the session to the rx thread until the rehandshake is over.
void TlsPump::park_tx() {
    if (!sent(tx_.flush())) {
        rehandshake_.fail("sending on the TLS connection failed");
        return;
    }
    rehandshake_.tx_parked(now_ns());
    // The rx thread may sit in poll(): it starts the handshake now, not after its timeout.
    rx_control_.notify();
    // After a failure the session is unusable: stay parked until stop(). Declined
    // (no handshake began): carry on.
    pollfd w{tx_control_.fd(), POLLIN, 0};
    while (!stopping() && rehandshake_state() != Rehandshake::idle && rehandshake_state() != Rehandshake::declined) {
        if (::poll(&w, 1, 20) > 0) tx_control_.drain();
    }
}

// rx thread: records wait in GnuTLS, the read-ahead or the socket.
bool TlsPump::readable_now() {
    if (gnutls_record_check_pending(session_) > 0 || batcher_.has_readahead()) return true;
    pollfd r{fd_, POLLIN, 0};
    return ::poll(&r, 1, 0) > 0;
}

// rx thread: runs a parked rehandshake; false when the pump ends.
bool TlsPump::serve_rehandshake() {
    std::string why;
    const auto on_data = [this] {
        const ssize_t n = rx_.read_record();
        if (n > 0 && consume(rx_.record(static_cast<std::size_t>(n)))) flush_rx();
    };
    // GnuTLS reads the handshake itself; its new keys are taken after.
    batcher_.pause_records();
    const bool ok = rehandshake_.run(session_, batcher_, rx_control_.stop, on_data, why);
    batcher_.resume_records();
    if (!ok) {
        rehandshake_.fail(why);
        finish(TlsPumpEnd::connection_lost, why);
        tx_control_.notify();
        return false;
    }
    stamp(last_rx_ns_);
    pollfd w{-1, 0, 0};
    while (!rx_control_.stop.load(std::memory_order_acquire) && rehandshake_state() == Rehandshake::done)
        ::poll(&w, 0, 5);
    return !rx_control_.stop.load(std::memory_order_acquire);
}

// rx thread: the batch to the tun. What went since the last flush, everything read between
// two polls (the read-ahead takes what the socket holds), is the wake-up's first receive for
// the linger.
void TlsPump::flush_rx() {
    if (Status st = rx_.deliver(); !st) LOG_DEBUG << "tun write: " << st.error().message;
    const std::uint64_t packets = counters_.rx_packets.load(std::memory_order_relaxed);
    if (packets == linger_packets_) return;
    const std::uint64_t bytes = counters_.rx_bytes.load(std::memory_order_relaxed);
    rx_linger_.received(packets - linger_packets_, bytes - linger_bytes_);
    rx_linger_.delivered(Clock::now());
    linger_packets_ = packets;
    linger_bytes_ = bytes;
}

// Returns false when the tunnel ends.
bool TlsPump::on_frame(const Frame& f) {
    switch (f.kind) {
        case Kind::data:
            if (f.payload.empty()) return true;
            bump(counters_.rx_frames);
            if (Status st = rx_.add_packet(f.payload); !st) LOG_DEBUG << "tun write: " << st.error().message;
            return true;
        case Kind::not_ip:
            bump(counters_.rx_frames);
            bump(counters_.drop_rx_not_ip);
            return true;
        case Kind::dpd_request: {
            bump(counters_.rx_dpd_requests);
            {
                std::lock_guard<std::mutex> lock(dpd_mutex_);
                dpd_payload_len_ = std::min(f.payload.size(), sizeof dpd_payload_);
                std::memcpy(dpd_payload_, f.payload.data(), dpd_payload_len_);
            }
            request(kDpdAnswer);
            return true;
        }
        case Kind::dpd_response:
            bump(counters_.rx_dpd_responses);
            dpd_response_ns_ = now_ns();
            return true;
        case Kind::keepalive: bump(counters_.rx_keepalives); return true;
        case Kind::end: finish(TlsPumpEnd::server_disconnect, f.end_reason); return false;
    }
    return true;
}

bool TlsPump::consume(std::span<const std::uint8_t> in) {
    for (;;) {
        auto f = framing_->next(in);
        if (!f) {
            finish(TlsPumpEnd::error, f.error().message);
            return false;
        }
        if (!*f) return true;
        if (!on_frame(**f)) return false;
    }
}

void TlsPump::rx_run() {
    const std::atomic<bool>& stop = rx_control_.stop;
    batcher_.open_records();
    bool owner_logged = false;
    if (!early_.empty() && !consume(early_)) {
        flush_rx();
        return;
    }
    pollfd r[2] = {{fd_, POLLIN, 0}, {rx_control_.fd(), POLLIN, 0}};
    while (!stop.load(std::memory_order_acquire)) {
        // Everything already received is read before the renegotiation's hello leaves
        // (bounded: the tx thread waits meanwhile).
        if (rehandshake_state() == Rehandshake::tx_parked) {
            if (!readable_now()) {
                if (!serve_rehandshake()) break;
            } else if (now_ns() - rehandshake_.parked_since() > TlsRehandshake::kQuietWaitNs / 5) {
                rehandshake_.decline(TlsRehandshake::kQuietWaitNs / 5);
            }
        }
        if (gnutls_record_check_pending(session_) == 0 && !batcher_.has_readahead()) {
            flush_rx();
            if (::poll(r, 2, kPollMs) < 0 && errno != EINTR) break;
            if (r[1].revents & POLLIN) {
                rx_control_.drain();
                continue;
            }
            if (!(r[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            // Woken by the socket: a short wait while a download arrives a few packets at a time.
            if (rx_linger_.linger_after_wakeup(Clock::now())) bump(counters_.rx_lingers);
        }
        const ssize_t n = rx_.read_record_into_slot(framing_->header_size());
        if (!owner_logged && batcher_.records_decided()) {
            owner_logged = true;
            LOG_INFO << "TLS records opened by " << batcher_.records_owner();
        }
        // Not fatal: e.g. GNUTLS_E_REHANDSHAKE, a TLS 1.3 session ticket.
        if (n < 0 && !gnutls_error_is_fatal(static_cast<int>(n))) continue;
        if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
            if (!stop)
                finish(TlsPumpEnd::connection_lost, std::string("the server closed the TLS connection") +
                                                        (framing_->mid_frame() ? " in the middle of a frame" : ""));
            break;
        }
        if (n < 0) {
            if (!stop)
                finish(TlsPumpEnd::connection_lost,
                       std::string("the TLS connection failed: ") + gnutls_strerror(static_cast<int>(n)));
            break;
        }
        stamp(last_rx_ns_);
        if (!take_landed(static_cast<std::size_t>(n))) break;
    }
    flush_rx();
}

// A record read into the next tun slot: one whole data frame stays there (its payload
// is the packet, not copied again); anything else goes through the decoder.
bool TlsPump::take_landed(std::size_t n) {
    const std::span<const std::uint8_t> pt = rx_.landed(n);
    if (const std::size_t len = framing_->whole_data_frame(pt)) {
        bump(counters_.rx_frames);
        rx_.commit_landed(len);
        return true;
    }
    return consume(rx_.landed_to_record(n));
}

}  // namespace espvpn::datapath
