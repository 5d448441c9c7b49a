#include "src/nm/owner_files.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace espvpn::nm {
namespace {

// How long the child may take to open the files (a hung network file system).
constexpr int kOpenTimeoutMs = 10000;

// One message per file: a status byte, 1 = opened (the descriptor rides along), 0 = not.
void send_result(int sock, int fd) {
    char ok = fd >= 0 ? 1 : 0;
    iovec iov{&ok, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

// -1: not opened; -2: the child is gone or too slow.
int receive_result(int sock) {
    pollfd p{sock, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, kOpenTimeoutMs)) < 0 && errno == EINTR) {
    }
    if (n <= 0) return -2;
    char ok = 0;
    iovec iov{&ok, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t got;
    while ((got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (got != 1) return -2;
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
            std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return ok ? fd : -1;
}

// In the child (after fork: system calls only): become the user, open each file, send it.
[[noreturn]] void child_open(int sock, uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                             const std::vector<const char*>& paths) {
    if (setgroups(groups.size(), groups.data()) != 0 || setgid(gid) != 0 || setuid(uid) != 0 ||
        (uid != 0 && (geteuid() == 0 || setuid(0) == 0)))
        _exit(1);
    for (const char* path : paths) {
        // O_NONBLOCK: a FIFO must not hang the open; only a regular file is accepted.
        int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        struct stat st{};
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
            close(fd);
            fd = -1;
        }
        send_result(sock, fd);
        if (fd >= 0) close(fd);
    }
    _exit(0);
}

}  // namespace

Result<std::vector<int>> open_as_owner(const std::string& user, const std::vector<ProfileFile>& files) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found)
        return make_error("the profile's owner '" + user + "' (connection.permissions) is not a user here");
    const uid_t uid = pw.pw_uid;
    const gid_t gid = pw.pw_gid;
    int count = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(count));
    if (getgrouplist(user.c_str(), gid, groups.data(), &count) < 0) {
        groups.resize(static_cast<std::size_t>(count));
        if (getgrouplist(user.c_str(), gid, groups.data(), &count) < 0)
            return make_error("cannot read the groups of the profile's owner '" + user + "'");
    }
    groups.resize(static_cast<std::size_t>(count));
    std::vector<const char*> paths;
    for (const auto& f : files) paths.push_back(f.path.c_str());

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return make_error(std::string("cannot open the profile's files: socketpair: ") + std::strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) {
        const int e = errno;
        close(sv[0]);
        close(sv[1]);
        return make_error(std::string("cannot open the profile's files: fork: ") + std::strerror(e));
    }
    if (pid == 0) {
        close(sv[0]);
        child_open(sv[1], uid, gid, groups, paths);
    }
    close(sv[1]);
    std::vector<int> fds;
    Status status;
    for (const auto& f : files) {
        const int fd = receive_result(sv[0]);
        if (fd == -2) {
            status = make_error("could not open the profile's '" + f.item + "' as " + user + " (the profile's owner)");
            break;
        }
        if (fd < 0) {
            status = make_error("the profile's '" + f.item + "' is not a file " + user +
                                " (the profile's owner) can read: missing, not readable by " + user +
                                ", or not a regular file");
            break;
        }
        fds.push_back(fd);
    }
    close(sv[0]);
    if (!status) kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (!status) {
        for (int fd : fds) close(fd);
        return status.error();
    }
    return fds;
}

}  // namespace espvpn::nm
