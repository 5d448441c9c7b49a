#include "src/io/seqpacket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace espvpn::io {

namespace {
std::string os_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }
}  // namespace

Status seqpacket_pair(UniqueFd& a, UniqueFd& b) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return make_error(os_error("socketpair"));
    a.reset(sv[0]);
    b.reset(sv[1]);
    return {};
}

Status send_packet(int socket, std::span<const std::uint8_t> bytes, int fd) {
    iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    while ((n = ::sendmsg(socket, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (n < 0) return make_error(os_error("send"));
    if (static_cast<std::size_t>(n) != bytes.size()) return make_error("send: short write");
    return {};
}

Result<Packet> receive_packet(int socket, std::size_t max) {
    Packet p;
    p.bytes.resize(max + 1);
    iovec iov{p.bytes.data(), p.bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (n < 0) return make_error(os_error("receive"));
    // Every descriptor that came is owned (closed) here, whatever else is wrong.
    std::vector<UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fds.emplace_back(fd);
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return make_error("receive: a message longer than allowed");
    if (fds.size() > 1) return make_error("receive: more than one descriptor");
    if (n == 0) {
        p.eof = true;
        p.bytes.clear();
        return p;
    }
    p.bytes.resize(static_cast<std::size_t>(n));
    if (!fds.empty()) p.fd = std::move(fds[0]);
    return p;
}

}  // namespace espvpn::io
