#include "src/io/status_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace espvpn::io {

namespace {

Error errno_error(const std::string& what, int err) { return make_error(what + ": " + std::strerror(err)); }

Result<sockaddr_un> address_of(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.empty() || path[0] != '/') return make_error("the status socket path must be absolute: '" + path + "'");
    if (path.size() >= sizeof a.sun_path) return make_error("the status socket path is too long: '" + path + "'");
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
}

// Someone accepts connections at `a` (a live server: its socket must stay).
bool listening(const sockaddr_un& a) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return false;
    return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
}

}  // namespace

Result<UniqueFd> open_status_listener(const std::string& path, const StatusSocketMode& mode) {
    auto addr = address_of(path);
    if (!addr) return addr.error();
    const auto slash = path.rfind('/');
    const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
    const std::string name = path.substr(slash + 1);
    if (name.empty() || name == "." || name == "..") return make_error("the status socket path names no file: '" + path + "'");

    // The directory: nobody but its owner (root or us) may create or replace names in it.
    UniqueFd dfd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd.valid()) return errno_error("status socket directory " + dir, errno);
    struct stat ds{};
    if (::fstat(dfd.get(), &ds) != 0) return errno_error("status socket directory " + dir, errno);
    if (ds.st_uid != 0 && ds.st_uid != ::geteuid())
        return make_error("status socket directory " + dir + " belongs to another user (uid " +
                          std::to_string(ds.st_uid) + ")");
    if ((ds.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        char octal[8];
        std::snprintf(octal, sizeof octal, "%o", static_cast<unsigned>(ds.st_mode & 07777));
        return make_error("status socket directory " + dir + " may be written by others (mode " + octal +
                          "): use one only root (or you) can write, e.g. /run/espvpn");
    }

    // What is there already: our own stale socket goes, anything else stays and is an error.
    struct stat st{};
    if (::fstatat(dfd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid())
            return make_error(path + " exists and is not a socket of ours: not replaced");
        if (listening(*addr)) return make_error("another process serves " + path + " (is this profile running already?)");
        if (::unlinkat(dfd.get(), name.c_str(), 0) != 0) return errno_error("removing the stale " + path, errno);
    } else if (errno != ENOENT) {
        return errno_error(path, errno);
    }

    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return errno_error("status socket", errno);
    // Created owner-only; opened up to `mode` once it is ours (no window with a wider mode).
    const mode_t old = ::umask(0177);
    const int rc = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
    const int err = errno;
    ::umask(old);
    if (rc != 0) return errno_error("binding the status socket " + path, err);
    auto undo = [&](const std::string& what) {
        const int e = errno;
        ::unlinkat(dfd.get(), name.c_str(), 0);
        return errno_error(what + " " + path, e);
    };
    if ((mode.owner != uid_t(-1) || mode.group != gid_t(-1)) &&
        ::fchownat(dfd.get(), name.c_str(), mode.owner, mode.group, AT_SYMLINK_NOFOLLOW) != 0)
        return undo("chown of the status socket");
    // The name is the socket just bound (no one else can write the directory).
    if (::fchmodat(dfd.get(), name.c_str(), mode.mode & 0777, 0) != 0) return undo("chmod of the status socket");
    if (::listen(fd.get(), 16) != 0) return undo("listen on the status socket");
    return fd;
}

Result<PeerCredentials> peer_credentials(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return errno_error("SO_PEERCRED", errno);
    PeerCredentials p;
    p.pid = cred.pid;
    p.uid = cred.uid;
    p.gid = cred.gid;
    gid_t groups[256];
    socklen_t glen = sizeof groups;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
        p.groups.assign(groups, groups + glen / sizeof(gid_t));
    // ERANGE (more than 256 groups): the primary group only; a group rule may then refuse.
    return p;
}

Result<UniqueFd> connect_status_socket(const std::string& path) {
    auto addr = address_of(path);
    if (!addr) return addr.error();
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return errno_error("socket", errno);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0)
        return errno_error("cannot reach the status socket " + path, errno);
    return fd;
}

}  // namespace espvpn::io

namespace espvpn::io {

ByteCounts interface_byte_counts(const std::string& name) {
    ByteCounts c;
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return c;
    auto read = [&](const char* which) -> std::uint64_t {
        const std::string path = "/sys/class/net/" + name + "/statistics/" + which;
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
        if (!fd.valid()) return 0;
        char buf[32] = {};
        const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
        if (n <= 0) return 0;
        return std::strtoull(buf, nullptr, 10);
    };
    c.rx = read("rx_bytes");
    c.tx = read("tx_bytes");
    return c;
}

}  // namespace espvpn::io
