// TlsRecordBatcher: sits under a GnuTLS session while a tunnel runs on it, so
// that one TLS record per packet costs no syscall per packet. Records sealed by
// the sending thread are gathered in a fixed buffer and leave with one send()
// (flush()); reads take whatever the socket has (many records) in one recv()
// and hand it to GnuTLS piece by piece. Records sealed by any other thread (a
// TLS 1.3 key update answered by the receiver, a renegotiation run while the
// sender is parked) go straight to the socket. Used by both TLS-framed tunnels
// (GP's HTTPS tunnel, AnyConnect's CSTP). Memory is fixed at construction.
//
// Receiving, the batcher can also open the application-data records itself
// (open_records(), crypto/tls_record.h): recv() then parses the records in its
// buffer and decrypts each straight out of it; anything else (a handshake record,
// an alert, a TLS 1.3 KeyUpdate or ticket, a record that does not open) goes to
// GnuTLS intact and in order: its read sequence number set to ours, the pull
// function limited to exactly that record, gnutls_record_recv, the state re-read.
#pragma once

#include <gnutls/gnutls.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "crypto/tls_record.h"
#include "protocols/base/result.h"

namespace espvpn::io {

class TlsRecordBatcher {
public:
    static constexpr std::size_t kDefaultOutSize = 512 * 1024;  // sealed records waiting for one send()
    static constexpr std::size_t kDefaultInSize = 256 * 1024;   // one recv() of many records

    // Takes over the session's transport on `fd` (which must be non-blocking).
    TlsRecordBatcher(gnutls_session_t session, int fd, std::size_t out_size = kDefaultOutSize,
                     std::size_t in_size = kDefaultInSize);
    // Back to plain socket calls for whatever the session still sends (close_notify).
    ~TlsRecordBatcher();
    TlsRecordBatcher(const TlsRecordBatcher&) = delete;
    TlsRecordBatcher& operator=(const TlsRecordBatcher&) = delete;

    // The calling thread becomes the sender: its records are gathered from now on.
    void become_sender() { sender_.store(std::this_thread::get_id(), std::memory_order_relaxed); }

    // Sender: bytes gathered and not yet sent. When they fill the buffer, GnuTLS
    // gets EAGAIN (the record is kept): flush, then repeat the same send.
    std::size_t gathered() const { return out_len_; }
    bool nearly_full() const { return out_len_ >= out_size_ / 2; }

    // What a flush ended with; `stalled` and `stopped` come from the wait callable.
    enum class Flush { sent, failed, closed, stopped, stalled };
    struct FlushOutcome {
        Flush result = Flush::sent;
        int error = 0;                              // errno for failed / closed
        std::chrono::steady_clock::duration stalled_for{};
        bool ok() const { return result == Flush::sent; }
        std::string describe() const;              // "the peer closed the connection (send: ...)" etc.
    };
    // Sender: writes everything gathered. While the socket is full, calls
    // `wait(stalled_for)` — which waits for room (POLLOUT on fd()) or returns
    // Flush::stopped / Flush::stalled to give up, Flush::sent to go on.
    template <class Wait>
    FlushOutcome flush(Wait&& wait);

    // Receiver: bytes read from the socket that GnuTLS has not taken yet (poll()
    // on the fd shows nothing for them).
    // With records opened here: a whole record waits in the buffer.
    bool has_readahead() const;

    // Receiver: from now on recv() opens the application-data records itself when
    // the session's version and cipher allow it (else GnuTLS keeps doing it: see
    // records_owner()). Call before the first recv().
    void open_records();
    // "espvpn (TLS1.3 AES-256-GCM)" or "GnuTLS (why)"; valid after the first recv().
    std::string records_owner() const;
    bool records_ours() const { return opener_active_; }
    bool records_decided() const { return !want_open_ || opener_tried_; }
    // Receiver: gnutls_record_recv's contract (> 0 bytes of application data in out,
    // 0 the peer closed, < 0 a GnuTLS error code, GNUTLS_E_AGAIN: nothing whole yet).
    ssize_t recv(std::uint8_t* out, std::size_t cap);
    // Receiver: GnuTLS reads freely (a renegotiation) until resume_records(), which
    // takes its new state.
    void pause_records();
    void resume_records();
    int fd() const { return fd_; }

private:
    static ssize_t vec_push(gnutls_transport_ptr_t self, const giovec_t* iov, int count);
    static ssize_t pull(gnutls_transport_ptr_t self, void* data, std::size_t n);
    // One send() of what is left; >0 sent, 0 full, <0 error (errno).
    ssize_t send_some(std::size_t& off);

    gnutls_session_t session_;
    int fd_;
    std::size_t out_size_, in_size_;
    std::unique_ptr<std::uint8_t[]> out_, in_;
    std::size_t out_len_ = 0;
    std::size_t in_off_ = 0, in_len_ = 0;
    static constexpr std::size_t kUnlimited = static_cast<std::size_t>(-1);
    std::size_t pull_limit_ = kUnlimited;  // bytes GnuTLS may still pull (records opened here: 0)
    bool want_open_ = false, opener_tried_ = false, opener_active_ = false, paused_ = false;
    std::optional<TlsRecordOpener> opener_;
    std::string not_ours_why_;
    // The whole record at in_off_, if there is one (oversized: a header no record may have).
    std::span<const std::uint8_t> buffered_record(bool& oversized) const;
    ssize_t fill();  // one recv() behind what is left (moved to the front); recv()'s result
    ssize_t gnutls_recv(std::uint8_t* out, std::size_t cap, std::size_t limit);
    void try_activate();
    std::atomic<std::thread::id> sender_{};
};

template <class Wait>
TlsRecordBatcher::FlushOutcome TlsRecordBatcher::flush(Wait&& wait) {
    using Clock = std::chrono::steady_clock;
    FlushOutcome out;
    std::size_t off = 0;
    Clock::time_point stalled_since{};
    while (off < out_len_) {
        const ssize_t n = send_some(off);
        if (n > 0) {
            stalled_since = {};
            continue;
        }
        if (n < 0) {
            out.error = errno;
            out.result = (out.error == EPIPE || out.error == ECONNRESET) ? Flush::closed : Flush::failed;
            break;
        }
        const Clock::time_point now = Clock::now();
        if (stalled_since == Clock::time_point{}) stalled_since = now;
        out.stalled_for = now - stalled_since;
        out.result = wait(out.stalled_for);
        if (out.result != Flush::sent) break;
    }
    out_len_ = 0;
    return out;
}

}  // namespace espvpn::io
