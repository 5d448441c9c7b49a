#include "src/sso/callback_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "src/io/owned_file.h"

namespace espvpn::sso {

namespace {

constexpr std::size_t kMaxCallback = 64 * 1024;
constexpr int kReadMs = 3000;

std::string errno_text() { return std::strerror(errno); }

Result<sockaddr_un> address(const std::string& path) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) return make_error("the callback socket path is too long: " + path);
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    return sa;
}

// The directory must be a real directory, owned by the user or root, writable by nobody else.
Status check_dir(const std::string& dir, uid_t uid) {
    struct stat st{};
    if (::lstat(dir.c_str(), &st) != 0) return make_error(dir + ": " + errno_text());
    if (!S_ISDIR(st.st_mode)) return make_error(dir + " is not a directory");
    if (st.st_uid != uid && st.st_uid != 0) return make_error(dir + " belongs to uid " + std::to_string(st.st_uid));
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return make_error(dir + " is writable by others");
    return {};
}

Status make_private_dir(const std::string& dir, uid_t uid, gid_t gid) {
    // /run/espvpn-sso: root's, entered (not listed) by all; each user's directory below is private.
    const std::string parent = dir.substr(0, dir.rfind('/'));
    const std::string name = dir.substr(dir.rfind('/') + 1);
    if (::mkdir(parent.c_str(), 0711) == 0) {
        if (::chmod(parent.c_str(), 0711) != 0) return make_error(parent + ": " + errno_text());
    } else if (errno != EEXIST) {
        return make_error(parent + ": " + errno_text());
    }
    if (auto st = check_dir(parent, 0); !st) return st;
    // Only root writes in the parent, so the name cannot be swapped; still, the new directory
    // is handed over by its descriptor (fchown), never by path.
    io::UniqueFd pfd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!pfd.valid()) return make_error(parent + ": " + errno_text());
    if (::mkdirat(pfd.get(), name.c_str(), 0700) != 0 && errno != EEXIST) return make_error(dir + ": " + errno_text());
    io::UniqueFd fd(::openat(pfd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return make_error(dir + ": " + errno_text());
    struct stat s{};
    if (::fstat(fd.get(), &s) != 0) return make_error(dir + ": " + errno_text());
    if (s.st_uid != uid || (s.st_mode & 07777) != 0700) {
        if (::fchown(fd.get(), uid, gid) != 0 || ::fchmod(fd.get(), 0700) != 0)
            return make_error(dir + ": " + errno_text());
    }
    return check_dir(dir, uid);
}

bool wait_fd(int fd, short events, int ms) {
    pollfd p{fd, events, 0};
    int r;
    while ((r = ::poll(&p, 1, ms)) < 0 && errno == EINTR) {
    }
    return r > 0;
}

}  // namespace

std::string callback_socket_path(uid_t uid) {
    const std::string runtime = "/run/user/" + std::to_string(uid);
    if (is_dir_of(runtime, uid)) return runtime + "/espvpn-sso-callback";
    return "/run/espvpn-sso/" + std::to_string(uid) + "/sso-callback";
}

Status prepare_callback_dir(uid_t uid, gid_t gid) {
    const std::string path = callback_socket_path(uid);
    if (path.rfind("/run/espvpn-sso/", 0) != 0) return {};
    return make_private_dir(path.substr(0, path.rfind('/')), uid, gid);
}

Result<CallbackListener> CallbackListener::open(const InvokingUser& user) {
    const std::string path = callback_socket_path(user.uid);
    const std::string dir = path.substr(0, path.rfind('/'));
    struct stat made{};
    // Made before the privilege split (prepare_callback_dir): the session process, no longer
    // root, only checks it (it may not even list /run/espvpn-sso).
    const bool prepared = ::lstat(dir.c_str(), &made) == 0 && S_ISDIR(made.st_mode) && made.st_uid == user.uid &&
                          (made.st_mode & 07777) == 0700 && user.uid != 0;
    if (path.rfind("/run/espvpn-sso/", 0) == 0 && !prepared) {
        if (auto st = make_private_dir(dir, user.uid, user.gid); !st)
            return make_error("the SSO callback directory: " + st.error().message);
    } else if (auto st = check_dir(dir, user.uid); !st) {
        return make_error("the SSO callback directory: " + st.error().message);
    }
    auto sa = address(path);
    if (!sa) return sa.error();
    // Everything on the path from here is done as the user (filesystem uid/gid of this
    // thread): the socket node is created theirs, so nothing is chowned by path (a name in
    // their directory they could swap for a symlink), and root's rights reach nothing here.
    io::FsIdentity as_user(user.uid, user.gid);
    if (as_user.failed()) return make_error("cannot act as " + user.name + " to make the SSO callback socket");
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) return make_error(path + " exists and is not a socket; remove it");
        // Left by an espvpn that died, or another login waiting now?
        io::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        bool live = probe.valid() && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&*sa), sizeof *sa) == 0;
        if (live) return make_error("another espvpn login is already waiting for a single sign-on callback (" + path + ")");
        ::unlink(path.c_str());
    }
    io::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return make_error("socket: " + errno_text());
    // Bound with a umask that leaves nobody else a moment to connect. bind() never follows
    // a symlink at the name: it fails (EADDRINUSE).
    mode_t old = ::umask(0177);
    int rc = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*sa), sizeof *sa);
    int err = errno;
    ::umask(old);
    if (rc != 0) return make_error("cannot listen for the SSO callback at " + path + ": " + std::strerror(err));
    if (::listen(fd.get(), 8) != 0) {
        err = errno;
        ::unlink(path.c_str());
        return make_error("cannot listen for the SSO callback at " + path + ": " + std::strerror(err));
    }
    return CallbackListener(std::move(fd), path, user.uid);
}

CallbackListener::~CallbackListener() {
    if (fd_.valid()) ::unlink(path_.c_str());  // then fd_ closes
}

Result<CallbackListener::Call> CallbackListener::accept_call() {
    Call call;
    call.fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (call.fd < 0) return make_error("accept: " + errno_text());
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(call.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        ::close(call.fd);
        return make_error("SO_PEERCRED: " + errno_text());
    }
    call.peer = cred.uid;
    call.peer_allowed = cred.uid == uid_ || cred.uid == 0;
    // A stranger's line is read too (then dropped unparsed): a socket closed with unread
    // data resets the connection, and the refusal would be lost.
    std::string data;
    char buf[4096];
    while (data.size() < kMaxCallback && data.find('\n') == std::string::npos) {
        if (!wait_fd(call.fd, POLLIN, kReadMs)) break;
        ssize_t n = ::read(call.fd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        data.append(buf, static_cast<std::size_t>(n));
    }
    if (auto nl = data.find('\n'); nl != std::string::npos) data.resize(nl);
    while (!data.empty() && (data.back() == '\r' || data.back() == ' ')) data.pop_back();
    if (call.peer_allowed) call.data = Secret::from_string(data);
    secure_zero(data.data(), data.size());
    secure_zero(buf, sizeof buf);
    return call;
}

void CallbackListener::reply(Call& call, const std::string& line) {
    if (call.fd < 0) return;
    std::string text = line + "\n";
    if (wait_fd(call.fd, POLLOUT, kReadMs)) (void)!::send(call.fd, text.data(), text.size(), MSG_NOSIGNAL);
    ::close(call.fd);
    call.fd = -1;
}

Status send_callback(std::string_view url, std::chrono::seconds timeout) {
    const std::string path = callback_socket_path(::getuid());
    auto sa = address(path);
    if (!sa) return sa.error();
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return make_error("socket: " + errno_text());
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&*sa), sizeof *sa) != 0) {
        int err = errno;
        ::close(fd);
        if (err == ENOENT || err == ECONNREFUSED)
            return make_error("no espvpn login is waiting for a single sign-on callback (" + path + ")");
        return make_error("cannot reach the waiting espvpn at " + path + ": " + std::strerror(err));
    }
    const int ms = static_cast<int>(std::chrono::milliseconds(timeout).count());
    std::string text(url);
    text += "\n";
    std::size_t off = 0;
    while (off < text.size()) {
        if (!wait_fd(fd, POLLOUT, ms)) break;
        ssize_t n = ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
    }
    secure_zero(text.data(), text.size());
    ::shutdown(fd, SHUT_WR);
    std::string answer;
    char buf[512];
    while (answer.size() < 4096 && wait_fd(fd, POLLIN, ms)) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        answer.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    while (!answer.empty() && (answer.back() == '\n' || answer.back() == '\r')) answer.pop_back();
    if (answer == "ok") return {};
    if (answer.empty()) return make_error("the waiting espvpn did not answer (" + path + ")");
    return make_error("espvpn " + answer);
}

}  // namespace espvpn::sso
