// Who is on the other end of a TCP connection over loopback, and who holds a loopback port:
// the AnyConnect external-browser listener (port 29786) takes the login token only from the
// invoking user's own processes, and says who holds its port when it cannot bind it.
// The kernel's socket table is asked by NETLINK_SOCK_DIAG (inet_diag); /proc/net/tcp and
// /proc/net/tcp6 (their uid column) when that is not available.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace espvpn::sso {

// The uid owning the socket at the far end of the connected loopback TCP socket `fd` (the
// client's socket, found by its address and port); nullopt when it cannot be found.
std::optional<uid_t> loopback_peer_uid(int fd);

// Who listens on TCP `port` (any address, IPv4 or IPv6): "uid 1000 (alice), pid 4242
// (python3)" as far as it can be found; "" when nothing is found.
std::string tcp_port_holder(std::uint16_t port);

}  // namespace espvpn::sso
