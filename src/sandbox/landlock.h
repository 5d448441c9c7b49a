// Landlock for the unprivileged session process: which files it may touch at all, on top
// of what its uid may. Unprivileged, inherited by every thread (the kernel applies it to
// the calling thread; call it before starting others) and by every program the process
// runs afterwards; it cannot be lifted.
//
// Usage, once, after the session has opened what it keeps open and before it reads from
// the network:
//   Result<int> abi = sandbox::restrict_files({.read_only = {cafile, certfile},
//                                             .read_write = {runtime_dir, state_dir}});
//   log at -v: sandbox::landlock_description(*abi)
//
// ESPVPN_LANDLOCK=0 in the environment skips it (returns 0, as on a kernel without it).
#pragma once

#include <string>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn::sandbox {

struct FileRules {
    // Files or directories the session was given (CA, certificate, key, token files):
    // read only. Each must exist: a missing one is an Error naming it.
    std::vector<std::string> read_only;
    // Its runtime and state directories (cookie cache, SSO socket and temp dirs, a
    // SoftHSM token directory): everything beneath them, read and write.
    std::vector<std::string> read_write;
    // Programs it runs that are not beneath the system directories (a CSD/HIP wrapper):
    // read and execute. Each must exist, as above.
    std::vector<std::string> executable{};
};

// The Landlock ABI version of the running kernel, 0 when it has none (or it is disabled).
int landlock_abi();

// Restricts the calling process's file access to: read and execute on the system (/usr,
// /etc, /lib*, /bin, /sbin, /opt, the directory /etc/resolv.conf points into,
// /sys/devices/system/cpu, /proc/self), read and write on the devices /dev/null,
// /dev/zero, /dev/full, /dev/random, /dev/urandom and /dev/tty (terminal ioctls too), plus
// `rules`. The rights are those the kernel's ABI knows (v1 file access, v2 moving files
// between directories, v3 truncate, v5 device ioctls; v6: no signals to processes outside
// the domain); network ports and abstract Unix sockets are not restricted. System paths
// missing on this machine are skipped. Sets no_new_privs (Landlock needs it).
// Returns the ABI version applied: 0 = none (a kernel without Landlock, or
// ESPVPN_LANDLOCK=0), to be said at -v. An Error when the kernel refused it or a given
// path is missing: the process may then be unrestricted.
Result<int> restrict_files(const FileRules& rules);

// A path of `rules` (or /usr, /etc) that the caller can open now but could not under the
// rules: some file systems make a new inode at every lookup, so a rule never matches and
// every access is refused (a 9p share, QEMU's -virtfs, without its cache; an overlay whose
// lower layer is one). Found by trial: a child process applies the rules and opens each
// path (one fork, at start-up). "": none, or no Landlock here.
std::string path_landlock_cannot_follow(const FileRules& rules);

// "Landlock ABI 7" or "Landlock: none (the kernel has no Landlock)", for -v.
std::string landlock_description(int abi);

}  // namespace espvpn::sandbox
