// The status and control socket's file (docs/SERVICE.md): an AF_UNIX stream socket
// bound in a directory only its owner (root, or the user running espvpn) can write,
// so nobody else can put a symlink or another file where it goes; the peer's
// credentials (SO_PEERCRED, SO_PEERGROUPS) for the server's access check; a client's
// connection.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

struct StatusSocketMode {
    mode_t mode = 0600;        // the socket file's permissions (connecting needs write)
    uid_t owner = uid_t(-1);   // chown to this user (-1: the creating process's)
    gid_t group = gid_t(-1);   // and group (-1: unchanged)
};

// A listening, non-blocking, close-on-exec socket at `path` (absolute). The directory must
// be owned by root or the effective user and writable by no one else. A socket already at
// `path` is removed only when it is ours (owned by the effective user) and nothing listens
// on it; anything else there is an error.
Result<UniqueFd> open_status_listener(const std::string& path, const StatusSocketMode& mode);

struct PeerCredentials {
    pid_t pid = 0;
    uid_t uid = uid_t(-1);
    gid_t gid = gid_t(-1);
    std::vector<gid_t> groups;  // supplementary groups (SO_PEERGROUPS)
};
// The connected peer's credentials, as the kernel recorded them at connect().
Result<PeerCredentials> peer_credentials(int fd);

// A client's blocking, close-on-exec connection to `path`.
Result<UniqueFd> connect_status_socket(const std::string& path);

}  // namespace espvpn::io

namespace espvpn::io {

// The bytes an interface received and sent (its sysfs statistics, 64-bit); {0, 0} when it is gone.
struct ByteCounts {
    std::uint64_t rx = 0, tx = 0;
};
ByteCounts interface_byte_counts(const std::string& name);

}  // namespace espvpn::io
