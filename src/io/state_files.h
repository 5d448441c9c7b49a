// The files a session keeps between runs or rewrites while it runs (the HOTP token's
// counter, the GlobalProtect portal cookie cache, --stats-json), read and written through
// one interface, so that the unprivileged session process of the privilege split can ask
// the privileged part for a file it may not open itself (a root-owned token file, root's
// cookie cache under /var/lib/espvpn/0, a stats file in a root-only directory).
//
// It lives in io/ because datapath/ (the stats writer) and session/ both use it;
// src/session/state_files.h names it for the session.
//
// Every implementation keeps these rules (LocalStateFiles does it in this process):
// - read: the file at `path`, opened with O_NOFOLLOW (a symlink at the name is refused, not
//   followed), a regular file of at most kMaxStateFile bytes; nullopt when nothing is there.
//   The bytes are a Secret (locked, no-dump pages): token files and cookies are secrets.
//   With them, the owner and mode of the file read (its fstat), for callers that trust only
//   a private file (the cookie cache).
// - write: replaces the file by rename: a new file `path + kStateTmpSuffix` is created with
//   O_CREAT|O_EXCL|O_NOFOLLOW (anything already at that name, a planted symlink included, is
//   refused and left alone), written, fsynced unless Sync::no, and renamed over `path`.
//   A symlink or anything but a regular file at `path` is refused. When a regular file is
//   there, the new one is made as that file's owner (its uid and gid as the filesystem ids
//   of the writing thread) with that file's mode; when nothing is there, as the writer's own
//   identity with `new_mode`. Nothing is ever chowned by path.
// - remove: unlinks `path` (never follows a symlink at it); true when something was removed,
//   false when nothing was there.
// Errors name the path and never carry the file's content.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "crypto/secret.h"
#include "protocols/base/result.h"
#include "src/io/owned_file.h"

namespace espvpn::io {

inline constexpr std::size_t kMaxStateFile = 64 * 1024;
// The temporary name beside the file: one fixed suffix, chosen here, never by the caller.
inline constexpr std::string_view kStateTmpSuffix = ".espvpn-new";

// What read() found.
struct StateFile {
    Secret bytes;
    uid_t uid = 0;
    gid_t gid = 0;
    mode_t mode = 0;  // the permission bits (07777)
};

class StateFiles {
public:
    virtual ~StateFiles() = default;
    virtual Result<std::optional<StateFile>> read(const std::string& path) = 0;
    virtual Status write(const std::string& path, std::string_view bytes, Sync sync, mode_t new_mode) = 0;
    virtual Result<bool> remove(const std::string& path) = 0;
};

// The files opened by this process, as the calling thread (its filesystem uid/gid, which
// the caller may set with FsIdentity).
class LocalStateFiles final : public StateFiles {
public:
    Result<std::optional<StateFile>> read(const std::string& path) override;
    Status write(const std::string& path, std::string_view bytes, Sync sync, mode_t new_mode) override;
    Result<bool> remove(const std::string& path) override;
};

}  // namespace espvpn::io
