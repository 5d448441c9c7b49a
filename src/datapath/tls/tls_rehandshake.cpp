#include "src/datapath/tls/tls_rehandshake.h"

#include <poll.h>

#include <chrono>
#include <cstdio>

namespace espvpn::datapath {

namespace {
constexpr int kPollMs = 100;
}  // namespace

std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

bool TlsRehandshake::request() {
    requested_ns_ = now_ns();
    int idle = static_cast<int>(State::idle);
    return state_.compare_exchange_strong(idle, static_cast<int>(State::requested));
}

std::string TlsRehandshake::failure() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
}

void TlsRehandshake::decline(std::int64_t waited_ns) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(waited_ns) / 1e9);
        failure_ = std::string("the server kept sending on the TLS connection for ") + seconds +
                   " (a renegotiation needs a pause in its data)";
    }
    state_ = static_cast<int>(State::declined);
}

void TlsRehandshake::tx_parked(std::int64_t now) {
    parked_ns_ = now;
    state_ = static_cast<int>(State::tx_parked);
}

void TlsRehandshake::fail(std::string why) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = std::move(why);
    }
    state_ = static_cast<int>(State::failed);
}

bool TlsRehandshake::run(gnutls_session_t session, const io::TlsRecordBatcher& batcher,
                         const std::atomic<bool>& stop, const std::function<void()>& on_data, std::string& why) {
    const std::int64_t t0 = now_ns();
    const std::int64_t deadline = t0 + kHandshakeNs;
    if (gnutls_protocol_get_version(session) == GNUTLS_TLS1_3) {
        // No renegotiation in TLS 1.3: new traffic keys both ways instead.
        for (;;) {
            int r = gnutls_session_key_update(session, GNUTLS_KU_PEER);
            if (r == 0) break;
            if ((r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) || now_ns() > deadline) {
                why = std::string("TLS 1.3 key update failed: ") + gnutls_strerror(r);
                return false;
            }
            pollfd w{batcher.fd(), POLLOUT, 0};
            poll(&w, 1, kPollMs);
        }
        ms_ = (now_ns() - t0) / 1000000;
        state_ = static_cast<int>(State::done);
        return true;
    }
    for (;;) {
        int r = gnutls_handshake(session);
        if (r == 0) break;
        if (r == GNUTLS_E_GOT_APPLICATION_DATA) {
            // GnuTLS has given this renegotiation up, the server has not (see
            // above): another hello would break the connection. The data still
            // goes to the tun; the caller opens a new tunnel.
            on_data();
            why = "the server sent data before answering the renegotiation (GnuTLS then abandons it)";
            return false;
        } else if (r == GNUTLS_E_WARNING_ALERT_RECEIVED) {
            if (gnutls_alert_get(session) == GNUTLS_A_NO_RENEGOTIATION) {
                why = "the server refused the TLS renegotiation";
                return false;
            }
        } else if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) {
            why = std::string("TLS rehandshake failed: ") + gnutls_strerror(r);
            return false;
        } else if (!batcher.has_readahead()) {
            pollfd w{batcher.fd(), static_cast<short>(gnutls_record_get_direction(session) ? POLLOUT : POLLIN), 0};
            poll(&w, 1, kPollMs);
        }
        if (stop) {
            why = "stopped";
            return false;
        }
        if (now_ns() > deadline) {
            why = "TLS rehandshake: no answer within 15 s";
            return false;
        }
    }
    ms_ = (now_ns() - t0) / 1000000;
    state_ = static_cast<int>(State::done);
    return true;
}

}  // namespace espvpn::datapath
