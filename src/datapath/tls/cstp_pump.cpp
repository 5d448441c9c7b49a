#include "src/datapath/tls/cstp_pump.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/log/logger.h"

namespace espvpn::datapath {

using anyconnect::CstpType;

namespace {
constexpr int kPollMs = 100;

TlsFramedOptions cstp_options(int mtu) {
    TlsFramedOptions o;
    o.max_inner_size = static_cast<std::size_t>(std::max(mtu, 576));
    // Slots hold what the tun reads: its MTU may be above CSTP's (set by an earlier connection).
    o.tun_mtu = std::max<std::size_t>(o.max_inner_size, 1500);
    return o;
}
}  // namespace

CstpPump::CstpPump(gnutls_session_t session, int fd, io::TunDevice& tun, int mtu)
    : session_(session), fd_(fd), tun_fd_(tun.fd()), batcher_(session_, fd),
      tx_(tun, session_, batcher_, tx_control_, counters_, cstp_options(mtu), anyconnect::kCstpHeaderSize),
      rx_(tun, session_, counters_, cstp_options(mtu), &tun_write_mutex_) {
    stamp(last_rx_ns_);
    stamp(last_tx_ns_);
}

CstpPump::~CstpPump() { stop(); }

void CstpPump::start(const std::vector<std::uint8_t>& early_bytes) {
    early_.assign(early_bytes.begin(), early_bytes.end());
    threads_.start("tls-tx", tx_control_, [this] { tx_run(); }, "tls-rx", rx_control_, [this] { rx_run(); });
}

void CstpPump::stop() { threads_.stop(); }

void CstpPump::request_rehandshake() {
    if (rehandshake_.request()) tx_control_.notify();
}

void CstpPump::resume() {
    rehandshake_.resume();
    tx_control_.notify();
}

std::optional<std::pair<CstpEnd, std::string>> CstpPump::ended() const {
    if (!ended_ || logout_in_progress_) return std::nullopt;
    std::lock_guard<std::mutex> lock(end_mutex_);
    return std::make_pair(end_, end_reason_);
}

void CstpPump::deliver(io::PacketBatch& batch) {
    if (auto w = rx_.write_tun(batch); !w) LOG_DEBUG << "tun write: " << w.error().message;
}

void CstpPump::request(unsigned what) {
    pending_.fetch_or(what);
    tx_control_.notify();
}

void CstpPump::finish(CstpEnd end, std::string reason) {
    std::lock_guard<std::mutex> lock(end_mutex_);
    if (ended_) return;
    end_ = end;
    end_reason_ = std::move(reason);
    ended_ = true;
}

bool CstpPump::sent(Status st) {
    if (st) {
        stamp(last_tx_ns_);
        return true;
    }
    if (!stopping()) finish(CstpEnd::connection_lost, "sending on the TLS connection failed: " + st.error().message);
    return false;
}

bool CstpPump::send_control(CstpType type, std::span<const std::uint8_t> payload) {
    std::uint8_t buf[anyconnect::kCstpHeaderSize + 1600];
    const std::size_t n = std::min(payload.size(), sizeof buf - anyconnect::kCstpHeaderSize);
    anyconnect::write_cstp_header(type, static_cast<std::uint16_t>(n), buf);
    if (n) std::memcpy(buf + anyconnect::kCstpHeaderSize, payload.data(), n);
    return sent(tx_.seal({buf, anyconnect::kCstpHeaderSize + n}));
}

// Between batches: the control packets asked for. False when the connection failed.
bool CstpPump::handle_requests() {
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
        if (!send_control(CstpType::dpd_response, {copy, n})) return false;
        bump(counters_.tx_dpd_responses);
    }
    if (what & kDpd) {
        if (!send_control(CstpType::dpd_request)) return false;
        bump(counters_.tx_dpd_requests);
        dpd_request_ns_ = now_ns();
    }
    if (what & kKeepalive) {
        if (!send_control(CstpType::keepalive)) return false;
        bump(counters_.tx_keepalives);
    }
    if (what & kLogout) {
        // The server closes the connection once it has the BYE: ended() waits for
        // logout_sent_, or the caller would take that close for a lost BYE.
        logout_in_progress_ = true;
        const std::vector<std::uint8_t> bye = anyconnect::cstp_logout_packet("Aborted by caller");
        const bool ok = sent(tx_.seal(bye)) && sent(tx_.flush());
        logout_sent_ = ok;
        logout_in_progress_ = false;
        if (!ok) return false;
    }
    return true;
}

void CstpPump::tx_run() {
    batcher_.become_sender();
    pollfd fds[2] = {{tun_fd_, POLLIN, 0}, {tx_control_.fd(), POLLIN, 0}};
    const auto write_header = [](std::span<std::uint8_t> framed, std::span<const std::uint8_t> inner) {
        anyconnect::write_cstp_header(CstpType::data, static_cast<std::uint16_t>(inner.size()), framed.data());
        return true;
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
                    finish(CstpEnd::error, "tun read: " + got.error().message);
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
bool CstpPump::server_quiet() const {
    const std::int64_t t = now_ns();
    const std::int64_t asked = dpd_request_ns_;
    const bool answer_due = asked > dpd_response_ns_ && t - asked < kDpdAnswerDueNs;
    return !answer_due && t - last_rx_ns() >= TlsRehandshake::kQuietNs;
}

// tx thread: hands the session to the rx thread until the rehandshake is over.
void CstpPump::park_tx() {
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
bool CstpPump::readable_now() {
    if (gnutls_record_check_pending(session_) > 0 || batcher_.has_readahead()) return true;
    pollfd r{fd_, POLLIN, 0};
    return ::poll(&r, 1, 0) > 0;
}

// rx thread: runs a parked rehandshake; false when the pump ends.
bool CstpPump::serve_rehandshake() {
    std::string why;
    const auto on_data = [this] {
        const ssize_t n = rx_.read_record();
        if (n > 0 && consume(rx_.record(static_cast<std::size_t>(n)))) flush_rx();
    };
    if (!rehandshake_.run(session_, batcher_, rx_control_.stop, on_data, why)) {
        rehandshake_.fail(why);
        finish(CstpEnd::connection_lost, why);
        tx_control_.notify();
        return false;
    }
    stamp(last_rx_ns_);
    pollfd w{-1, 0, 0};
    while (!rx_control_.stop.load(std::memory_order_acquire) && rehandshake_state() == Rehandshake::done)
        ::poll(&w, 0, 5);
    return !rx_control_.stop.load(std::memory_order_acquire);
}

void CstpPump::flush_rx() {
    if (Status st = rx_.deliver(); !st) LOG_DEBUG << "tun write: " << st.error().message;
}

// Returns false when the tunnel ends.
bool CstpPump::on_packet(const anyconnect::CstpPacket& p) {
    switch (p.type) {
        case CstpType::data:
            if (p.payload.empty()) return true;
            bump(counters_.rx_frames);
            if (Status st = rx_.add_packet(p.payload); !st) LOG_DEBUG << "tun write: " << st.error().message;
            return true;
        case CstpType::dpd_request: {
            bump(counters_.rx_dpd_requests);
            {
                std::lock_guard<std::mutex> lock(dpd_mutex_);
                dpd_payload_len_ = std::min(p.payload.size(), sizeof dpd_payload_);
                std::memcpy(dpd_payload_, p.payload.data(), dpd_payload_len_);
            }
            request(kDpdAnswer);
            return true;
        }
        case CstpType::dpd_response:
            bump(counters_.rx_dpd_responses);
            dpd_response_ns_ = now_ns();
            return true;
        case CstpType::keepalive: bump(counters_.rx_keepalives); return true;
        case CstpType::disconnect: {
            std::string text;
            if (p.payload.size() > 1)
                text.assign(reinterpret_cast<const char*>(p.payload.data()) + 1, p.payload.size() - 1);
            finish(CstpEnd::server_disconnect,
                   "the server sent DISCONNECT" + (text.empty() ? std::string() : ": " + text));
            return false;
        }
        case CstpType::terminate:
            finish(CstpEnd::server_disconnect, "the server sent TERMINATE (shutting down)");
            return false;
        case CstpType::compressed_data: break;  // refused by the decoder
    }
    return true;
}

bool CstpPump::consume(std::span<const std::uint8_t> in) {
    for (;;) {
        auto p = decoder_.next(in);
        if (!p) {
            finish(CstpEnd::error, p.error().message);
            return false;
        }
        if (!*p) return true;
        if (!on_packet(**p)) return false;
    }
}

void CstpPump::rx_run() {
    const std::atomic<bool>& stop = rx_control_.stop;
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
        }
        const ssize_t n = rx_.read_record();
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_REHANDSHAKE) continue;
        if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
            if (!stop) finish(CstpEnd::connection_lost, "the server closed the TLS connection");
            break;
        }
        if (n < 0) {
            if (!stop)
                finish(CstpEnd::connection_lost,
                       std::string("the TLS connection failed: ") + gnutls_strerror(static_cast<int>(n)));
            break;
        }
        stamp(last_rx_ns_);
        if (!consume(rx_.record(static_cast<std::size_t>(n)))) break;
    }
    flush_rx();
}

}  // namespace espvpn::datapath
