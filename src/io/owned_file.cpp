#include "src/io/owned_file.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace espvpn::io {

FsIdentity::FsIdentity(uid_t uid, gid_t gid) {
    if (::geteuid() != 0 || (uid == ::geteuid() && gid == ::getegid())) return;
    // setfsgid first: once the fsuid is not 0, the thread may no longer change its fsgid.
    old_gid_ = static_cast<gid_t>(::setfsgid(gid));
    old_uid_ = static_cast<uid_t>(::setfsuid(uid));
    // Both calls return the previous id whether or not they worked: ask again to know.
    if (static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) != uid ||
        static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) != gid) {
        ::setfsuid(old_uid_);
        ::setfsgid(old_gid_);
        failed_ = true;
        return;
    }
    switched_ = true;
}

FsIdentity::~FsIdentity() {
    if (!switched_) return;
    ::setfsuid(old_uid_);
    ::setfsgid(old_gid_);
}

Result<PathAt> open_parent(const std::string& path) {
    if (path.empty()) return make_error("an empty file name");
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? std::string(1, '.')
                            : slash == 0                ? std::string(1, '/')
                                                        : path.substr(0, slash);
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.empty() || name == "." || name == "..") return make_error(path + " does not name a file");
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return make_error("cannot open the directory " + dir + ": " + std::strerror(errno));
    return PathAt{std::move(fd), std::move(name)};
}

Result<UniqueFd> create_new_at(int dir, const std::string& name, int flags, mode_t mode, const std::string& shown) {
    UniqueFd fd(::openat(dir, name.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0600));
    if (!fd.valid()) {
        const int err = errno;
        if (err == EEXIST) {
            struct stat st{};
            const bool link = ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
            return make_error("refusing to create " + shown + ": " + (link ? "a symlink" : "something") +
                              " is already there (not followed; remove it if it is yours)");
        }
        return make_error("cannot create " + shown + ": " + std::strerror(err));
    }
    // The umask may have taken bits the caller wants (a 0644 pid file); never more than asked.
    if (::fchmod(fd.get(), mode & 07777) != 0) {
        const int err = errno;
        ::unlinkat(dir, name.c_str(), 0);
        return make_error("cannot set the mode of " + shown + ": " + std::strerror(err));
    }
    return fd;
}

Result<std::string> make_private_dir_for(std::string templ, uid_t uid, gid_t gid) {
    if (!::mkdtemp(templ.data())) return make_error("cannot make a directory " + templ + ": " + std::strerror(errno));
    auto fail = [&](const std::string& why) -> Result<std::string> {
        ::rmdir(templ.c_str());
        return make_error(templ + ": " + why);
    };
    UniqueFd fd(::open(templ.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return fail(std::strerror(errno));
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0700)
        return fail("not the directory just made");
    if ((st.st_uid != uid || st.st_gid != gid) && ::fchown(fd.get(), uid, gid) != 0)
        return fail(std::string("cannot hand it over: ") + std::strerror(errno));
    return templ;
}

Status replace_file(const std::string& path, std::span<const std::uint8_t> data, mode_t mode,
                    const std::string& tmp_suffix, Sync sync) {
    auto at = open_parent(path);
    if (!at) return at.error();
    return replace_file_at(at->dir.get(), at->name, path, data, mode, tmp_suffix, sync);
}

Status replace_file_at(int dir, const std::string& name, const std::string& path, std::span<const std::uint8_t> data,
                       mode_t mode, const std::string& tmp_suffix, Sync sync) {
    const std::string tmp = name + tmp_suffix;
    const std::string shown = path + tmp_suffix;
    auto fd = create_new_at(dir, tmp, O_WRONLY, mode, shown);
    if (!fd) return fd.error();
    auto fail = [&](const std::string& what, int err) -> Status {
        ::unlinkat(dir, tmp.c_str(), 0);
        return make_error(what + ": " + std::strerror(err));
    };
    std::size_t off = 0;
    while (off < data.size()) {
        ssize_t n = ::write(fd->get(), data.data() + off, data.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail("cannot write " + shown, n < 0 ? errno : EIO);
        off += static_cast<std::size_t>(n);
    }
    if (sync == Sync::yes && ::fsync(fd->get()) != 0) return fail("cannot write " + shown, errno);
    fd->reset();
    if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0)
        return fail("cannot replace " + path, errno);
    return {};
}

}  // namespace espvpn::io
