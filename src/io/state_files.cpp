#include "src/io/state_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace espvpn::io {

Result<std::optional<StateFile>> LocalStateFiles::read(const std::string& path) {
    // O_NONBLOCK: a FIFO planted at the name must not hang the session.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) {
        const int err = errno;
        if (err == ENOENT) return std::optional<StateFile>();
        if (err == ELOOP)
            return make_error("refusing " + path + ": it is a symlink (not followed; name the file itself)");
        return make_error("cannot read " + path + ": " + std::strerror(err));
    }
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) return make_error("cannot read " + path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return make_error("refusing " + path + ": not a regular file");
    // One byte more than allowed, to see a file that grew past the limit while read.
    Secret buf(kMaxStateFile + 1);
    std::size_t used = 0;
    while (used < buf.size()) {
        ssize_t n = ::read(fd.get(), buf.reveal_mutable().data() + used, buf.size() - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return make_error("cannot read " + path + ": " + std::strerror(errno));
        if (n == 0) break;
        used += static_cast<std::size_t>(n);
    }
    if (used > kMaxStateFile) return make_error(path + " is larger than 64 KiB");
    return std::optional<StateFile>(StateFile{Secret(buf.reveal().first(used)), st.st_uid, st.st_gid,
                                              static_cast<mode_t>(st.st_mode & 07777)});
}

Status LocalStateFiles::write(const std::string& path, std::string_view bytes, Sync sync, mode_t new_mode) {
    auto at = open_parent(path);
    if (!at) return at.error();
    struct stat st{};
    std::optional<FsIdentity> owner;
    mode_t mode = new_mode & 0777;
    if (::fstatat(at->dir.get(), at->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode))
            return make_error("refusing to replace " + path + ": it is a symlink (not followed; name the file itself)");
        if (!S_ISREG(st.st_mode)) return make_error("refusing to replace " + path + ": not a regular file");
        owner.emplace(st.st_uid, st.st_gid);
        if (owner->failed())
            return make_error("cannot write " + path + " as its owner (uid " + std::to_string(st.st_uid) + ")");
        mode = st.st_mode & 0777;
    } else if (errno != ENOENT) {
        return make_error("cannot write " + path + ": " + std::strerror(errno));
    }
    auto data = std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    return replace_file_at(at->dir.get(), at->name, path, data, mode, std::string(kStateTmpSuffix), sync);
}

Result<bool> LocalStateFiles::remove(const std::string& path) {
    // unlink removes a symlink at the name itself, never what it points to.
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    return make_error("cannot remove " + path + ": " + std::strerror(errno));
}

}  // namespace espvpn::io
