#include "src/io/tls_record_batcher.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

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
    if (self->in_off_ == self->in_len_) {
        const ssize_t r = ::recv(self->fd_, self->in_.get(), self->in_size_, 0);
        if (r <= 0) return r;  // errno tells GnuTLS EAGAIN from a failure
        self->in_off_ = 0;
        self->in_len_ = static_cast<std::size_t>(r);
    }
    const std::size_t k = std::min(n, self->in_len_ - self->in_off_);
    std::memcpy(data, self->in_.get() + self->in_off_, k);
    self->in_off_ += k;
    return static_cast<ssize_t>(k);
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
