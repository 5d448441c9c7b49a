#include "src/io/tls_record_batcher.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "protocols/base/byte_order.h"

namespace espvpn::io {

namespace {
gnutls_transport_ptr_t fd_as_transport(int fd) {
    return reinterpret_cast<gnutls_transport_ptr_t>(static_cast<std::intptr_t>(fd));
}
int transport_as_fd(gnutls_transport_ptr_t p) { return static_cast<int>(reinterpret_cast<std::intptr_t>(p)); }

ssize_t plain_vec_push(gnutls_transport_ptr_t fd, const giovec_t* iov, int count) {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(reinterpret_cast<const iovec*>(iov));
    m.msg_iovlen = static_cast<std::size_t>(count);
    return ::sendmsg(transport_as_fd(fd), &m, MSG_NOSIGNAL);
}
ssize_t plain_pull(gnutls_transport_ptr_t fd, void* data, std::size_t n) { return ::recv(transport_as_fd(fd), data, n, 0); }
}  // namespace

TlsRecordBatcher::TlsRecordBatcher(gnutls_session_t session, int fd, std::size_t out_size, std::size_t in_size)
    : session_(session), fd_(fd), out_size_(out_size), in_size_(in_size), out_(new std::uint8_t[out_size]),
      in_(new std::uint8_t[in_size]) {
    gnutls_transport_set_ptr(session_, this);
    gnutls_transport_set_vec_push_function(session_, vec_push);
    gnutls_transport_set_pull_function(session_, pull);
}

TlsRecordBatcher::~TlsRecordBatcher() {
    // GnuTLS reads on after us (a close_notify): its sequence number must be ours.
    if (opener_active_) {
        std::uint8_t seq[8];
        store_be64(seq, opener_->seq());
        (void)gnutls_record_set_state(session_, 1, seq);
    }
    gnutls_transport_set_ptr(session_, fd_as_transport(fd_));
    gnutls_transport_set_vec_push_function(session_, plain_vec_push);
    gnutls_transport_set_pull_function(session_, plain_pull);
}

ssize_t TlsRecordBatcher::vec_push(gnutls_transport_ptr_t p, const giovec_t* iov, int count) {
    auto* self = static_cast<TlsRecordBatcher*>(p);
    if (std::this_thread::get_id() != self->sender_.load(std::memory_order_relaxed))
        return plain_vec_push(fd_as_transport(self->fd_), iov, count);
    std::size_t total = 0;
    for (int i = 0; i < count; ++i) total += iov[i].iov_len;
    if (self->out_len_ + total > self->out_size_) {
        if (self->out_len_ == 0) return plain_vec_push(fd_as_transport(self->fd_), iov, count);  // larger than the buffer
        gnutls_transport_set_errno(self->session_, EAGAIN);
        errno = EAGAIN;
        return -1;
    }
    for (int i = 0; i < count; ++i) {
        std::memcpy(self->out_.get() + self->out_len_, iov[i].iov_base, iov[i].iov_len);
        self->out_len_ += iov[i].iov_len;
    }
    return static_cast<ssize_t>(total);
}

ssize_t TlsRecordBatcher::pull(gnutls_transport_ptr_t p, void* data, std::size_t n) {
    auto* self = static_cast<TlsRecordBatcher*>(p);
    if (self->pull_limit_ == 0) {  // records opened here: GnuTLS gets only what is handed to it
        gnutls_transport_set_errno(self->session_, EAGAIN);
        errno = EAGAIN;
        return -1;
    }
    if (self->pull_limit_ != kUnlimited) n = std::min(n, self->pull_limit_);
    if (self->in_off_ == self->in_len_) {
        const ssize_t r = ::recv(self->fd_, self->in_.get(), self->in_size_, 0);
        if (r <= 0) return r;  // errno tells GnuTLS EAGAIN from a failure
        self->in_off_ = 0;
        self->in_len_ = static_cast<std::size_t>(r);
    }
    const std::size_t k = std::min(n, self->in_len_ - self->in_off_);
    std::memcpy(data, self->in_.get() + self->in_off_, k);
    self->in_off_ += k;
    if (self->pull_limit_ != kUnlimited) self->pull_limit_ -= k;
    return static_cast<ssize_t>(k);
}

// ---- records opened here ----------------------------------------------------------

bool TlsRecordBatcher::has_readahead() const {
    if (!opener_active_) return in_off_ < in_len_;
    bool oversized = false;
    return !buffered_record(oversized).empty() || oversized;
}

void TlsRecordBatcher::open_records() { want_open_ = true; }

std::string TlsRecordBatcher::records_owner() const {
    if (opener_active_) return "espvpn (" + opener_->describe() + ")";
    return "GnuTLS (" + (not_ours_why_.empty() ? std::string("not asked") : not_ours_why_) + ")";
}

std::span<const std::uint8_t> TlsRecordBatcher::buffered_record(bool& oversized) const {
    oversized = false;
    const std::size_t have = in_len_ - in_off_;
    if (have < kTlsRecordHeaderSize) return {};
    const std::uint8_t* p = in_.get() + in_off_;
    const std::size_t len = load_be16(p + 3);
    if (len > kTlsMaxCiphertext) {
        oversized = true;
        return {};
    }
    if (have < kTlsRecordHeaderSize + len) return {};
    return {p, kTlsRecordHeaderSize + len};
}

ssize_t TlsRecordBatcher::fill() {
    if (in_off_ > 0) {
        std::memmove(in_.get(), in_.get() + in_off_, in_len_ - in_off_);
        in_len_ -= in_off_;
        in_off_ = 0;
    }
    const ssize_t r = ::recv(fd_, in_.get() + in_len_, in_size_ - in_len_, 0);
    if (r > 0) in_len_ += static_cast<std::size_t>(r);
    return r;
}

// GnuTLS reads `limit` bytes (kUnlimited: as it likes), its read sequence number ours first.
ssize_t TlsRecordBatcher::gnutls_recv(std::uint8_t* out, std::size_t cap, std::size_t limit) {
    std::uint8_t seq[8];
    store_be64(seq, opener_->seq());
    if (const int rc = gnutls_record_set_state(session_, 1, seq); rc < 0) return rc;
    pull_limit_ = limit;
    const ssize_t n = gnutls_record_recv(session_, out, cap);
    pull_limit_ = 0;
    // Keys change after a KeyUpdate or a renegotiation; the sequence number always.
    if (Status st = opener_->reload(session_); !st) {
        // Left our AEADs (cannot happen on an established session): GnuTLS from here on.
        not_ours_why_ = st.error().message;
        opener_active_ = false;
        pull_limit_ = kUnlimited;
    }
    return n;
}

void TlsRecordBatcher::try_activate() {
    // Only at a record boundary with nothing decrypted waiting in GnuTLS: GnuTLS reads
    // a stream record by record (its header, then exactly its body), so with nothing
    // pending it holds no part of the next one.
    if (!want_open_ || opener_active_ || paused_ || gnutls_record_check_pending(session_) > 0) return;
    if (!opener_) {
        if (opener_tried_) return;
        opener_tried_ = true;
        Result<TlsRecordOpener> o = TlsRecordOpener::from_gnutls(session_);
        if (!o) {
            not_ours_why_ = o.error().message;
            return;
        }
        opener_.emplace(std::move(*o));
    } else if (Status st = opener_->reload(session_); !st) {
        not_ours_why_ = st.error().message;
        opener_.reset();
        return;
    }
    opener_active_ = true;
    pull_limit_ = 0;
}

void TlsRecordBatcher::pause_records() {
    paused_ = true;
    if (!opener_active_) return;
    std::uint8_t seq[8];
    store_be64(seq, opener_->seq());
    (void)gnutls_record_set_state(session_, 1, seq);
    opener_active_ = false;
    pull_limit_ = kUnlimited;
}

void TlsRecordBatcher::resume_records() {
    paused_ = false;
    try_activate();
}

ssize_t TlsRecordBatcher::recv(std::uint8_t* out, std::size_t cap) {
    try_activate();
    if (!opener_active_) return gnutls_record_recv(session_, out, cap);
    for (;;) {
        bool oversized = false;
        const std::span<const std::uint8_t> rec = buffered_record(oversized);
        // GnuTLS answers a header no record may have with its error.
        if (oversized) return gnutls_recv(out, cap, kUnlimited);
        if (rec.empty()) {
            const ssize_t r = fill();
            if (r > 0) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return GNUTLS_E_AGAIN;
            // The peer closed, or the socket failed: GnuTLS says what that is (a
            // truncated record, a premature end) from what is left and the socket.
            return gnutls_recv(out, cap, kUnlimited);
        }
        const TlsRecordOpened r = opener_->open(rec, {out, cap});
        if (r.status == TlsOpenStatus::ok) {
            in_off_ += rec.size();
            if (r.length == 0) continue;  // an empty record carries nothing
            return static_cast<ssize_t>(r.length);
        }
        // Not application data for us, or it does not open: GnuTLS's, exactly that record.
        return gnutls_recv(out, cap, rec.size());
    }
}

ssize_t TlsRecordBatcher::send_some(std::size_t& off) {
    const ssize_t n = ::send(fd_, out_.get() + off, out_len_ - off, MSG_NOSIGNAL);
    if (n > 0) {
        off += static_cast<std::size_t>(n);
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n == 0) errno = EPIPE;
    return -1;
}

std::string TlsRecordBatcher::FlushOutcome::describe() const {
    switch (result) {
        case Flush::sent: return "sent";
        case Flush::closed: return std::string("the peer closed the connection (send: ") + std::strerror(error) + ")";
        case Flush::failed: return std::string("send: ") + std::strerror(error);
        case Flush::stopped: return "stopped";
        case Flush::stalled:
            return "the peer has not taken data for " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(stalled_for).count()) + " s";
    }
    return "?";
}

}  // namespace espvpn::io
