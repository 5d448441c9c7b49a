#include "src/io/proxy_tunnel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <memory>
#include <cerrno>
#include <cstring>
#include <vector>

#include "protocols/proxy/connect_auth.h"
#include "protocols/proxy/ntlm.h"
#include "src/io/tls_stream.h"
#include "src/io/udp_socket.h"
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

using ProxyReconnect = std::function<Status()>;

// One reply to CONNECT, read byte by byte up to the blank line (so nothing of the TLS
// that follows a 2xx is taken from the socket), then, for a refusal the connection
// survives, its body, so the next request can go on the same connection.
Result<proxy::ConnectReply> read_reply(ProxyWire& wire, const ProxySettings& p, bool& reusable) {
    proxy::ConnectReplyReader reader;
    std::vector<std::uint8_t> rx;
    struct ZeroOnExit {
        std::vector<std::uint8_t>& b;
        ~ZeroOnExit() { secure_zero(b.data(), b.size()); }
    } zero{rx};
    // Up to `want` more bytes into the reader; how many of them it took.
    auto feed = [&](std::size_t want) -> Result<std::size_t> {
        rx.clear();
        if (auto st = wire.receive(rx, want); !st) return st.error();
        auto used = reader.feed(rx);
        if (!used) return make_error("proxy " + p.spec.display() + ": " + used.error().message);
        return *used;
    };
    while (!reader.head_complete())  // a byte at a time: what follows the head is the tunnel's
        if (auto used = feed(1); !used) return used.error();
    proxy::ConnectReply head = reader.reply();
    if (head.status / 100 != 2 && reader.may_reuse()) {
        while (!reader.done()) {
            auto used = feed(4096);
            if (!used) return used.error();
            if (*used < rx.size()) return make_error("proxy " + p.spec.display() + " sent more than its reply");
        }
    }
    reusable = reader.reusable();
    return reader.reply();
}

Status http_connect(ProxyWire& wire, const ProxySettings& p, const std::string& host, std::uint16_t port,
                    const ProxyReconnect& reconnect) {
    proxy::ConnectAuth auth(p.spec, p.auth, host, port);
    Secret request = auth.first_request();
    // At most four requests (none, NTLM negotiate, NTLM authenticate, Basic): ConnectAuth
    // tries each method once; the bound is a second guard.
    for (int round = 0; round < 5; ++round) {
        if (auto st = wire.send(request.reveal()); !st) return st;
        bool reusable = false;
        auto reply = read_reply(wire, p, reusable);
        if (!reply) return reply.error();
        if (reply->status / 100 == 2) {
            LOG_DEBUG << "proxy " << p.spec.display() << " opened a tunnel to " << endpoint_text(host, port) << " ("
                      << reply->status << " " << reply->reason << ", authentication: " << auth.method() << ")";
            return {};
        }
        std::array<std::uint8_t, 8> nonce{};
        if (int rc = gnutls_rnd(GNUTLS_RND_NONCE, nonce.data(), nonce.size()); rc < 0)
            return make_error("no random bytes for the NTLM client challenge");
        timespec now{};
        clock_gettime(CLOCK_REALTIME, &now);
        auto step = auth.on_refusal(*reply, reusable, proxy::ntlm::filetime_from_unix(now.tv_sec, now.tv_nsec), nonce);
        if (step.kind == proxy::ConnectAuth::Step::Kind::fail) return make_error(step.error);
        LOG_DEBUG << "proxy " << p.spec.display() << " answered " << reply->status << ": trying " << auth.method()
                  << " authentication" << (step.kind == proxy::ConnectAuth::Step::Kind::send ? "" : " on a new connection");
        if (step.kind == proxy::ConnectAuth::Step::Kind::reconnect_then_send) {
            if (auto st = reconnect(); !st) return st;
        }
        request = std::move(step.request);
    }
    return make_error("proxy " + p.spec.display() + " kept refusing the connection to " + endpoint_text(host, port));
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
        if (!reply) return make_error("proxy " + name + " (to " + endpoint_text(host, port) + "): " + reply.error().message);
        if (reply->complete) break;
        const std::size_t more = reply->needed ? reply->needed - rx.size() : 5 - rx.size();
        if (auto st = wire.receive_exactly(rx, more); !st) return st;
    }
    LOG_DEBUG << "SOCKS5 proxy " << name << " connected us to " << endpoint_text(host, port);
    return {};
}

}  // namespace

Status open_proxy_tunnel(int& fd, const ProxySettings& proxy, const std::string& host, std::uint16_t port,
                         std::chrono::milliseconds timeout, int cancel_fd,
                         const std::function<Result<int>()>& connect_proxy) {
    const auto deadline = Clock::now() + timeout;
    auto wire = std::make_unique<ProxyWire>(fd, proxy.spec.display(), deadline, cancel_fd);
    if (proxy.spec.kind == proxy::ProxyKind::socks5) return socks5_connect(*wire, proxy, host, port);
    // A proxy that closes after its 407 gets the next request on a new connection.
    ProxyReconnect reconnect = [&]() -> Status {
        auto next = connect_proxy();
        if (!next) return make_error("proxy " + proxy.spec.display() + ": " + next.error().message);
        ::close(fd);
        fd = *next;
        *wire = ProxyWire(fd, proxy.spec.display(), deadline, cancel_fd);
        return {};
    };
    return http_connect(*wire, proxy, host, port, reconnect);
}

}  // namespace espvpn::io
