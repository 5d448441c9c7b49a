#include "src/sso/loopback_peer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "src/io/unique_fd.h"

namespace espvpn::sso {

namespace {

// inet_diag's exact lookup of one TCP socket by its own (local) and remote address.
std::optional<uid_t> diag_uid(const sockaddr_storage& own, const sockaddr_storage& remote) {
    io::UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (!nl.valid()) return std::nullopt;
    struct {
        nlmsghdr nlh;
        inet_diag_req_v2 req;
    } msg{};
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.req.sdiag_family = static_cast<std::uint8_t>(own.ss_family);
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = ~0U;
    msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (own.ss_family == AF_INET) {
        const auto& a = reinterpret_cast<const sockaddr_in&>(own);
        const auto& b = reinterpret_cast<const sockaddr_in&>(remote);
        msg.req.id.idiag_sport = a.sin_port;
        msg.req.id.idiag_dport = b.sin_port;
        std::memcpy(msg.req.id.idiag_src, &a.sin_addr, 4);
        std::memcpy(msg.req.id.idiag_dst, &b.sin_addr, 4);
    } else if (own.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(own);
        const auto& b = reinterpret_cast<const sockaddr_in6&>(remote);
        msg.req.id.idiag_sport = a.sin6_port;
        msg.req.id.idiag_dport = b.sin6_port;
        std::memcpy(msg.req.id.idiag_src, &a.sin6_addr, 16);
        std::memcpy(msg.req.id.idiag_dst, &b.sin6_addr, 16);
    } else {
        return std::nullopt;
    }
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(nl.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) !=
        static_cast<ssize_t>(sizeof msg))
        return std::nullopt;
    timeval tv{1, 0};  // the kernel answers at once; never hang on it
    ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    alignas(nlmsghdr) char buf[8192];
    ssize_t n = ::recv(nl.get(), buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    for (auto left = static_cast<unsigned>(n); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) return std::nullopt;  // NLMSG_ERROR: no such socket
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) return std::nullopt;
        return static_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid;
    }
    return std::nullopt;
}

// An address and port as /proc/net/tcp{,6} print them ("0100007F:1F90"): the address's
// 32-bit words as stored, in hex, then the port.
std::string proc_text(const sockaddr_storage& a) {
    char out[64];
    std::uint32_t w[4] = {};
    std::uint16_t port = 0;
    int words = 1;
    if (a.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
        std::memcpy(w, &v4.sin_addr, 4);
        port = ntohs(v4.sin_port);
    } else {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
        std::memcpy(w, &v6.sin6_addr, 16);
        port = ntohs(v6.sin6_port);
        words = 4;
    }
    std::string s;
    for (int i = 0; i < words; ++i) {
        std::snprintf(out, sizeof out, "%08X", w[i]);
        s += out;
    }
    std::snprintf(out, sizeof out, ":%04X", port);
    return s + out;
}

struct ProcLine {
    std::string local, remote, state;
    uid_t uid = 0;
    unsigned long inode = 0;
};

std::vector<ProcLine> proc_table(const char* file) {
    std::vector<ProcLine> lines;
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line) && lines.size() < 100000) {
        std::istringstream f(line);
        ProcLine p;
        std::string sl, queues, timer, retr, timeout;
        if (f >> sl >> p.local >> p.remote >> p.state >> queues >> timer >> retr >> p.uid >> timeout >> p.inode)
            lines.push_back(std::move(p));
    }
    return lines;
}

std::optional<uid_t> proc_uid(const sockaddr_storage& own, const sockaddr_storage& remote) {
    const std::string local = proc_text(own), rem = proc_text(remote);
    for (const auto& p : proc_table(own.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6"))
        if (p.local == local && p.remote == rem) return p.uid;
    return std::nullopt;
}

std::string user_name(uid_t uid) {
    passwd pw{};
    passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return found->pw_name;
    return {};
}

// The first process with the socket inode open: "pid N (comm)"; "" when none is seen.
std::string process_with_socket(unsigned long inode) {
    const std::string want = "socket:[" + std::to_string(inode) + "]";
    DIR* proc = ::opendir("/proc");
    if (!proc) return {};
    std::string found;
    int scanned = 0;
    while (dirent* e = ::readdir(proc)) {
        if (!found.empty() || ++scanned > 100000) break;
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        const std::string fd_dir = std::string("/proc/") + e->d_name + "/fd";
        DIR* fds = ::opendir(fd_dir.c_str());
        if (!fds) continue;
        char target[64];
        while (dirent* f = ::readdir(fds)) {
            const std::string link = fd_dir + "/" + f->d_name;
            ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
            if (n <= 0) continue;
            if (std::string(target, static_cast<std::size_t>(n)) != want) continue;
            std::ifstream comm(std::string("/proc/") + e->d_name + "/comm");
            std::string name;
            std::getline(comm, name);
            found = std::string("pid ") + e->d_name + (name.empty() ? "" : " (" + name + ")");
            break;
        }
        ::closedir(fds);
    }
    ::closedir(proc);
    return found;
}

}  // namespace

std::optional<uid_t> loopback_peer_uid(int fd) {
    sockaddr_storage own{}, peer{};
    socklen_t own_len = sizeof own, peer_len = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&own), &own_len) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
        return std::nullopt;
    if (own.ss_family != peer.ss_family || (own.ss_family != AF_INET && own.ss_family != AF_INET6))
        return std::nullopt;
    // The peer's socket: its own address is our remote one, and the other way round.
    if (auto uid = diag_uid(peer, own)) return uid;
    return proc_uid(peer, own);
}

std::string tcp_port_holder(std::uint16_t port) {
    char suffix[8];
    std::snprintf(suffix, sizeof suffix, ":%04X", port);
    for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        for (const auto& p : proc_table(file)) {
            if (p.state != "0A" || p.local.size() < 5 || p.local.compare(p.local.size() - 5, 5, suffix) != 0) continue;
            const std::string name = user_name(p.uid);
            std::string who = "uid " + std::to_string(p.uid) + (name.empty() ? "" : " (" + name + ")");
            if (std::string proc = process_with_socket(p.inode); !proc.empty()) who += ", " + proc;
            return who;
        }
    }
    return {};
}

}  // namespace espvpn::sso
