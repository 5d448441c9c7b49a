// DnsSocket: a connected, non-blocking UDP socket to one DNS server, for the
// domain-based split tunnel's queries (the control thread polls its fd). Bound
// to a device (SO_BINDTODEVICE: the tun), its queries take that device whatever
// the routing table says; connected, the kernel hands it only the server's
// datagrams. Its local port is the kernel's ephemeral choice (random). listen():
// the wildcard domains' forwarder, bound to the tun's address, unconnected.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "protocols/base/result.h"
#include "src/io/udp_socket.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

class DnsSocket {
public:
    // `server`: a numeric address ("10.0.0.53", "fd00::53"); `device`: "" for none.
    static Result<DnsSocket> open(const std::string& server, unsigned port, const std::string& device);

    // Bound to `address` (numeric) and `port`, unconnected: receive() says who sent, send() to it.
    static Result<DnsSocket> listen(const std::string& address, unsigned port);
    // listen()'s socket alone (bound to `device` when not ""), for a process that hands it on
    // (the broker: port 53 needs CAP_NET_BIND_SERVICE); listening() wraps such a socket.
    static Result<UniqueFd> listen_fd(const std::string& address, unsigned port, const std::string& device);
    static DnsSocket listening(UniqueFd fd, std::string address) { return DnsSocket(std::move(fd), std::move(address)); }

    int fd() const { return fd_.get(); }
    const std::string& server() const { return server_; }
    // One datagram, to `to` on a listening socket (never blocks: a full buffer is an error,
    // the query then times out).
    Status send(std::span<const std::uint8_t> datagram, const SocketAddress* to = nullptr);
    // One datagram into `buffer` (its length; a longer one is cut: the parser refuses it),
    // nullopt when none is waiting; an ICMP error from the server (refused, unreachable)
    // is an Error, and the socket goes on. `from`: the sender (a listening socket's).
    Result<std::optional<std::size_t>> receive(std::span<std::uint8_t> buffer, SocketAddress* from = nullptr);

private:
    DnsSocket(UniqueFd fd, std::string server) : fd_(std::move(fd)), server_(std::move(server)) {}
    UniqueFd fd_;
    std::string server_;
};

}  // namespace espvpn::io
