// The TLS renegotiation of a running TLS-framed tunnel (AnyConnect's rekey
// "ssl", docs/protocols/anyconnect.md §6): the live session renegotiates (TLS 1.2; a KeyUpdate on TLS
// 1.3). GnuTLS allows no record I/O beside a handshake, so the tx thread parks
// and the rx thread runs it; both stay parked after a success until resume(),
// so the control thread can export a fresh DTLS PSK and swap the carrier while
// nobody touches the session.
//
// A GnuTLS client gives its renegotiation up when a record of application data
// arrives before the ServerHello (gnutls_handshake: GOT_APPLICATION_DATA, its
// state back at the start), yet the server answers the hello it got: a second
// hello then breaks the connection. So the hello leaves only once the server
// has been silent for kQuietNs with no DPD answer due, and after everything
// already received has been read; if that moment does not come within
// kQuietWaitNs the rehandshake is declined (nothing broken: the caller opens a
// new tunnel instead). A failed handshake ends the tunnel with the reason.
//
// This class is the state shared by the three threads and the handshake
// itself; the pump (tls_pump.cpp) decides when each step runs.
#pragma once

#include <gnutls/gnutls.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "src/io/tls_record_batcher.h"

namespace espvpn::datapath {

std::int64_t now_ns();  // steady clock, the pump's and the session's time base

class TlsRehandshake {
public:
    enum class State { idle, requested, tx_parked, done, failed, declined };
    static constexpr std::int64_t kQuietNs = 100 * 1000000LL;        // server silent this long: hello may go
    static constexpr std::int64_t kQuietWaitNs = 5 * 1000000000LL;   // ... waited for at most this long
    static constexpr std::int64_t kHandshakeNs = 15 * 1000000000LL;  // the handshake itself

    // Control thread: idle -> requested (true when it changed: wake the tx thread).
    bool request();
    State state() const { return static_cast<State>(state_.load()); }
    // After done: both threads continue. After declined: back to idle.
    void resume() { state_ = static_cast<int>(State::idle); }
    std::int64_t ms() const { return ms_; }
    // How long the last rehandshake waited for the server to pause.
    std::int64_t wait_ms() const { return (parked_ns_ - requested_ns_) / 1000000; }
    // Why the last rehandshake failed or was declined.
    std::string failure() const;

    // tx thread: the server has not paused within kQuietWaitNs of the request.
    bool waited_too_long(std::int64_t now) const { return now - requested_ns_ > kQuietWaitNs; }
    // tx / rx thread: no handshake (the server kept sending for `waited_ns`).
    void decline(std::int64_t waited_ns);
    // tx thread: flushed and parked; the rx thread may run the handshake.
    void tx_parked(std::int64_t now);
    std::int64_t parked_since() const { return parked_ns_; }
    void fail(std::string why);

    // rx thread, tx parked: the handshake, bounded by kHandshakeNs. Application
    // data the server sent before it saw the hello is handed to `on_data` (which
    // reads one record). Sets done, or returns false with `why` (the caller ends the tunnel).
    bool run(gnutls_session_t session, const io::TlsRecordBatcher& batcher, const std::atomic<bool>& stop,
             const std::function<void()>& on_data, std::string& why);

private:
    std::atomic<int> state_{static_cast<int>(State::idle)};
    std::atomic<std::int64_t> ms_{0};
    std::atomic<std::int64_t> requested_ns_{0}, parked_ns_{0};
    mutable std::mutex mutex_;
    std::string failure_;  // under mutex_
};

}  // namespace espvpn::datapath
