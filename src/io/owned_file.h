// Files and directories espvpn creates where someone else may reach the path (a user's
// directory, $TMPDIR, the directory of --pid-file): never through a symlink, never over a
// name that is already there, and created as the user they are for (the calling thread's
// filesystem uid/gid), so that nothing is ever chowned by path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "protocols/base/result.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

// While alive, the calling thread's filesystem uid and gid are `uid` and `gid`: permission
// checks on paths are that user's, and what the thread creates is theirs. Only the calling
// thread changes (setfsuid is per thread). Nothing changes when the process is not root or
// the ids are already the process's own.
class FsIdentity {
public:
    FsIdentity(uid_t uid, gid_t gid);
    ~FsIdentity();
    FsIdentity(const FsIdentity&) = delete;
    FsIdentity& operator=(const FsIdentity&) = delete;
    // The switch was needed and made (false: nothing to do, or the kernel refused it).
    bool switched() const { return switched_; }
    // The switch was needed and the kernel refused it.
    bool failed() const { return failed_; }

private:
    uid_t old_uid_ = 0;
    gid_t old_gid_ = 0;
    bool switched_ = false;
    bool failed_ = false;
};

// `path` split into its directory (opened O_DIRECTORY, following the symlinks the user put
// in the directory part) and its last component.
struct PathAt {
    UniqueFd dir;
    std::string name;
};
Result<PathAt> open_parent(const std::string& path);

// Creates `name` in `dir` with O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC (and `flags`, e.g.
// O_WRONLY), then fchmods it to `mode`. A name already there, symlink or not, is refused
// and left alone. `shown`: the path the error names.
Result<UniqueFd> create_new_at(int dir, const std::string& name, int flags, mode_t mode, const std::string& shown);

// A new private directory from `templ` (mkdtemp's ...XXXXXX), mode 0700, handed to `uid`:`gid`
// by its descriptor (opened O_NOFOLLOW, checked to be the directory just made, then fchown),
// never by path. Works where only root may create (a root-only $TMPDIR). Returns its path.
Result<std::string> make_private_dir_for(std::string templ, uid_t uid, gid_t gid);

// Replaces the file `path` with `data`: a new file `path + tmp_suffix` (create_new_at, so a
// planted name is refused), written, fsynced (Sync::no: not, for a file rewritten every second
// that a crash may lose), renamed over `path` (rename replaces a symlink at `path`, never
// follows it). `mode` is the new file's mode. Errors name the file.
enum class Sync { yes, no };
Status replace_file(const std::string& path, std::span<const std::uint8_t> data, mode_t mode,
                    const std::string& tmp_suffix, Sync sync = Sync::yes);
// The same in the directory `dir` (open_parent's), for the file `name`; `path` is what errors show.
Status replace_file_at(int dir, const std::string& name, const std::string& path, std::span<const std::uint8_t> data,
                       mode_t mode, const std::string& tmp_suffix, Sync sync);

}  // namespace espvpn::io
