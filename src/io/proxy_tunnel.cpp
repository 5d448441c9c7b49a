#include "src/io/proxy_tunnel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "src/io/tls_stream.h"
#include "src/log/logger.h"

namespace espvpn::io {

namespace {

using Clock = std::chrono::steady_clock;

class ProxyWire {
public:
    ProxyWire(int fd, std::string name, Clock::time_point deadline, int cancel_fd)
        : fd_(fd), name_(std::move(name)), deadline_(deadline), cancel_fd_(cancel_fd) {}

    Status send(std::span<const std::uint8_t> bytes) {
        std::size_t off = 0;
        while (off < bytes.size()) {
            ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
            if (n > 0) {
                off += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (auto st = wait(POLLOUT, "sending to"); !st) return st;
                continue;
            }
            return make_error("sending to proxy " + name_ + " failed: " + std::strerror(errno));
        }
        return {};
    }

    // Up to `max` bytes (at least one), or an error (EOF included).
    Status receive(std::vector<std::uint8_t>& into, std::size_t max) {
        while (true) {
            std::size_t old = into.size();
            into.resize(old + max);
            ssize_t n = ::recv(fd_, into.data() + old, max, 0);
            into.resize(old + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
            if (n > 0) return {};
            if (n == 0) return make_error("proxy " + name_ + " closed the connection");
            if (errno != EAGAIN && errno != EINTR)
                return make_error("receiving from proxy " + name_ + " failed: " + std::strerror(errno));
            if (auto st = wait(POLLIN, "waiting for"); !st) return st;
        }
    }

    // Exactly n more bytes.
    Status receive_exactly(std::vector<std::uint8_t>& into, std::size_t n) {
        const std::size_t want = into.size() + n;
        while (into.size() < want)
            if (auto st = receive(into, want - into.size()); !st) return st;
        return {};
    }

private:
    Status wait(short events, const char* what) {
        switch (wait_fd(fd_, events, cancel_fd_, deadline_)) {
            case FdWait::ready: return {};
            case FdWait::cancelled:
                return make_error(std::string(kCancelledMessage) + " (" + what + " proxy " + name_ + ")");
            case FdWait::timed_out: return make_error(std::string("timed out ") + what + " proxy " + name_);
            case FdWait::poll_failed: break;
        }
        return make_error(std::string("poll failed: ") + std::strerror(errno));
    }

    int fd_;
    std::string name_;
    Clock::time_point deadline_;
    int cancel_fd_;
};

std::string target_text(const std::string& host, std::uint16_t port) {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Status http_connect(ProxyWire& wire, const ProxySettings& p, const std::string& host, std::uint16_t port) {
    const bool with_auth = p.basic_auth && !p.spec.user.empty();
    Secret request = proxy::build_connect_request(p.spec, host, port, p.basic_auth);
    if (auto st = wire.send(request.reveal()); !st) return st;
    std::vector<std::uint8_t> rx;
    struct ZeroOnExit {
        std::vector<std::uint8_t>& b;
        ~ZeroOnExit() { secure_zero(b.data(), b.size()); }
    } zero{rx};
    while (true) {
        // Byte by byte is wasteful but keeps whatever follows the header in the socket;
        // a reply header is a few hundred bytes, once per connection.
        if (auto st = wire.receive(rx, 1); !st) return st;
        auto reply = proxy::parse_connect_reply(rx);
        if (!reply) return make_error("proxy " + p.spec.display() + ": " + reply.error().message);
        if (!*reply) continue;
        const proxy::ConnectReply& r = **reply;
        if (r.status / 100 == 2) {
            LOG_DEBUG << "proxy " << p.spec.display() << " opened a tunnel to " << target_text(host, port) << " ("
                      << r.status << " " << r.reason << ")";
            return {};
        }
        std::string msg = "proxy " + p.spec.display() + " refused the connection to " + target_text(host, port) +
                          ": " + std::to_string(r.status) + " " + r.reason;
        if (r.status == 407 || r.status == 401) {  // 407 per RFC 9110; tinyproxy answers 401
            std::string schemes;
            for (const auto& a : r.authenticate) schemes += (schemes.empty() ? "" : ", ") + a.substr(0, a.find(' '));
            if (with_auth)
                msg += " (the user name and password for user '" + p.spec.user + "' were not accepted)";
            else if (!p.spec.user.empty())
                msg += " (Basic authentication, the one espvpn answers, sends the password in clear and is off "
                       "unless --proxy-auth=basic, as in openconnect)";
            else
                msg += " (it wants " + (schemes.empty() ? std::string("authentication") : schemes) +
                       ": give --proxy http://USER:PASS@host:port/)";
            if (!schemes.empty() && schemes.find("Basic") == std::string::npos)
                msg += "; espvpn answers only Basic, the proxy offers " + schemes;
        }
        return make_error(msg);
    }
}

Status socks5_connect(ProxyWire& wire, const ProxySettings& p, const std::string& host, std::uint16_t port) {
    const bool offer_auth = !p.spec.user.empty();
    const std::string name = p.spec.display();
    if (auto st = wire.send(proxy::socks5_greeting(offer_auth)); !st) return st;
    std::vector<std::uint8_t> rx;
    if (auto st = wire.receive_exactly(rx, 2); !st) return st;
    auto method = proxy::parse_socks5_choice(rx, offer_auth);
    if (!method) return make_error("proxy " + name + ": " + method.error().message);
    if (*method == proxy::kSocksUserPass) {
        auto request = proxy::socks5_user_pass_request(p.spec.user, p.spec.password);
        if (!request) return make_error("proxy " + name + ": " + request.error().message);
        if (auto st = wire.send(request->reveal()); !st) return st;
        rx.clear();
        if (auto st = wire.receive_exactly(rx, 2); !st) return st;
        if (auto st = proxy::parse_socks5_auth_reply(rx); !st)
            return make_error("proxy " + name + ": " + st.error().message + " (user '" + p.spec.user + "')");
    }
    auto request = proxy::socks5_connect_request(host, port);
    if (!request) return make_error("proxy " + name + ": " + request.error().message);
    if (auto st = wire.send(*request); !st) return st;
    rx.clear();
    // The reply code is in the second byte: read it first, a refusing server may close after it.
    if (auto st = wire.receive_exactly(rx, 2); !st) return st;
    while (true) {
        auto reply = proxy::parse_socks5_connect_reply(rx);
        if (!reply) return make_error("proxy " + name + " (to " + target_text(host, port) + "): " + reply.error().message);
        if (reply->complete) break;
        const std::size_t more = reply->needed ? reply->needed - rx.size() : 5 - rx.size();
        if (auto st = wire.receive_exactly(rx, more); !st) return st;
    }
    LOG_DEBUG << "SOCKS5 proxy " << name << " connected us to " << target_text(host, port);
    return {};
}

}  // namespace

Status open_proxy_tunnel(int fd, const ProxySettings& proxy, const std::string& host, std::uint16_t port,
                         std::chrono::milliseconds timeout, int cancel_fd) {
    ProxyWire wire(fd, proxy.spec.display(), Clock::now() + timeout, cancel_fd);
    if (proxy.spec.kind == proxy::ProxyKind::socks5) return socks5_connect(wire, proxy, host, port);
    return http_connect(wire, proxy, host, port);
}

}  // namespace espvpn::io
