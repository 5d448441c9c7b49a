#include "src/io/dns_socket.h"

#include <errno.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "src/io/udp_socket.h"

namespace espvpn::io {

namespace {
std::string os_error(const std::string& what) { return what + ": " + std::strerror(errno); }
}  // namespace

Result<DnsSocket> DnsSocket::open(const std::string& server, unsigned port, const std::string& device) {
    auto to = SocketAddress::parse(endpoint_text(server, port));
    if (!to) return make_error("DNS server " + server + ": " + to.error().message);
    UniqueFd fd(::socket(to->family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return make_error(os_error("DNS socket"));
    if (!device.empty() &&
        ::setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, device.c_str(), static_cast<socklen_t>(device.size())) != 0)
        return make_error(os_error("DNS socket: bind to " + device));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to->storage), to->length) != 0)
        return make_error(os_error("DNS socket: connect to " + to->to_string()));
    return DnsSocket(std::move(fd), server);
}

Result<UniqueFd> DnsSocket::listen_fd(const std::string& address, unsigned port, const std::string& device) {
    auto at = SocketAddress::parse(endpoint_text(address, port));
    if (!at) return make_error("DNS forwarder " + address + ": " + at.error().message);
    UniqueFd fd(::socket(at->family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return make_error(os_error("DNS forwarder socket"));
    if (!device.empty() &&
        ::setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, device.c_str(), static_cast<socklen_t>(device.size())) != 0)
        return make_error(os_error("DNS forwarder: bind to " + device));
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&at->storage), at->length) != 0)
        return make_error(os_error("DNS forwarder: bind to " + at->to_string()));
    return fd;
}

Result<DnsSocket> DnsSocket::listen(const std::string& address, unsigned port) {
    auto fd = listen_fd(address, port, "");
    if (!fd) return fd.error();
    return DnsSocket(std::move(*fd), endpoint_text(address, port));
}

Status DnsSocket::send(std::span<const std::uint8_t> datagram, const SocketAddress* to) {
    auto peer = [&] { return "DNS to " + (to ? to->to_string() : server_); };
    const ssize_t n = ::sendto(fd_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                               to ? reinterpret_cast<const sockaddr*>(&to->storage) : nullptr, to ? to->length : 0);
    if (n < 0) return make_error(os_error(peer()));
    if (static_cast<std::size_t>(n) != datagram.size()) return make_error(peer() + ": short send");
    return {};
}

Result<std::optional<std::size_t>> DnsSocket::receive(std::span<std::uint8_t> buffer, SocketAddress* from) {
    for (int tries = 0; tries < 4; ++tries) {
        if (from) from->length = sizeof from->storage;
        const ssize_t n = ::recvfrom(fd_.get(), buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_TRUNC,
                                     from ? reinterpret_cast<sockaddr*>(&from->storage) : nullptr,
                                     from ? &from->length : nullptr);
        if (n >= 0) return std::optional<std::size_t>(std::min(static_cast<std::size_t>(n), buffer.size()));
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<std::size_t>{};
        return make_error(os_error("DNS " + server_));
    }
    return std::optional<std::size_t>{};
}

}  // namespace espvpn::io
