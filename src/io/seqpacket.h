// One message per datagram over an AF_UNIX SOCK_SEQPACKET socket (the broker and the
// session process), with at most one descriptor beside it (SCM_RIGHTS).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "protocols/base/result.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

struct Packet {
    std::vector<std::uint8_t> bytes;
    UniqueFd fd;       // the descriptor that came with it, if any
    bool eof = false;  // the peer closed its end (bytes empty)
};

// Both ends, SOCK_SEQPACKET | SOCK_CLOEXEC.
Status seqpacket_pair(UniqueFd& a, UniqueFd& b);
// Sends `bytes` (and `fd` when >= 0); retries on EINTR, never raises SIGPIPE.
Status send_packet(int socket, std::span<const std::uint8_t> bytes, int fd = -1);
// Blocks for the next message (at most `max` bytes: a longer one is an error, as is more
// than one descriptor; descriptors received are close-on-exec).
Result<Packet> receive_packet(int socket, std::size_t max);

}  // namespace espvpn::io
