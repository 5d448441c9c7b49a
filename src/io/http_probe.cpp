#include "src/io/http_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "protocols/http/response_parser.h"
#include "src/io/udp_socket.h"

namespace espvpn::io {

namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

// Waits for `events` on `fd`: true when ready; an Error on the deadline or a cancel.
Status wait_for(int fd, short events, int cancel_fd, Clock::time_point deadline, const char* what) {
    for (;;) {
        pollfd p[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
        const int n = ::poll(p, 2, ms_until(deadline));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return make_error(std::string("poll: ") + std::strerror(errno));
        if (n > 0 && (p[1].revents & POLLIN)) return make_error("cancelled");
        if (n == 0) return make_error(std::string("no answer in time (") + what + ")");
        return {};
    }
}

// The first address of `route` that takes a TCP connection before the deadline.
Result<UniqueFd> connect_probe(ProbeRoute& route, std::uint16_t port, int cancel_fd, Clock::time_point deadline) {
    std::string failures;
    for (const std::string& address : route.addresses) {
        auto sa = SocketAddress::parse(endpoint_text(address, port));
        if (!sa) continue;
        UniqueFd& given = sa->family() == AF_INET6 ? route.v6 : route.v4;
        UniqueFd fd = given.valid() ? std::move(given)
                                    : UniqueFd(::socket(sa->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!fd.valid()) {
            failures += "; " + address + ": " + std::strerror(errno);
            continue;
        }
        int err = 0;
        if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa->storage), sa->length) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                Status w = wait_for(fd.get(), POLLOUT, cancel_fd, deadline, "connecting");
                if (!w) return w.error();
                socklen_t len = sizeof err;
                if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
            }
        }
        if (err == 0) return fd;
        failures += "; " + address + ": " + std::strerror(err);
    }
    return make_error("cannot connect" + (failures.empty() ? std::string(": no address") : failures));
}

}  // namespace

Result<std::vector<std::string>> resolve_probe_host(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list); rc != 0)
        return make_error("cannot resolve " + host + ": " + gai_strerror(rc));
    std::vector<std::string> v4, v6;
    for (addrinfo* a = list; a; a = a->ai_next) {
        std::string n = numeric_host(a->ai_addr);
        auto& out = a->ai_family == AF_INET6 ? v6 : v4;
        if (!n.empty() && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    ::freeaddrinfo(list);
    v4.insert(v4.end(), v6.begin(), v6.end());
    return v4;
}

Result<captive::ProbeAnswer> http_probe(const captive::HttpUrl& url, std::chrono::milliseconds timeout, int cancel_fd,
                                        ProbeRoute route) {
    if (route.addresses.empty()) {
        auto found = resolve_probe_host(url.host);
        if (!found) return found.error();
        route.addresses = std::move(*found);
    }
    const Clock::time_point deadline = Clock::now() + timeout;
    auto connected = connect_probe(route, url.port, cancel_fd, deadline);
    if (!connected) return connected.error();
    UniqueFd fd = std::move(*connected);
    const std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
    const std::string request = "GET " + url.target + " HTTP/1.1\r\nHost: " + host +
                                (url.port == 80 ? std::string() : ":" + std::to_string(url.port)) +
                                "\r\nUser-Agent: espvpn captive-portal probe\r\nAccept: */*\r\n"
                                "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
    std::size_t sent = 0;
    while (sent < request.size()) {
        if (Status w = wait_for(fd.get(), POLLOUT, cancel_fd, deadline, "sending"); !w) return w.error();
        const ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return make_error(std::string("sending: ") + std::strerror(errno));
        sent += static_cast<std::size_t>(n);
    }
    http::ParserLimits limits;
    limits.max_header_bytes = captive::kMaxAnswerBytes;
    limits.max_header_count = 64;
    limits.max_body_bytes = captive::kMaxAnswerBytes;
    http::ResponseParser parser(limits);
    parser.begin("GET");
    std::size_t received = 0;
    bool eof = false, cut = false;
    char buf[4096];
    while (!parser.done()) {
        if (received >= captive::kMaxAnswerBytes) {
            cut = true;  // the rest is never read
            break;
        }
        if (Status w = wait_for(fd.get(), POLLIN, cancel_fd, deadline, "reading the answer"); !w) {
            if (parser.head_complete()) {
                cut = true;  // a head and part of a body that dribbles: judged on what came
                break;
            }
            return w.error();
        }
        const std::size_t room = std::min(sizeof buf, captive::kMaxAnswerBytes - received);
        const ssize_t n = ::recv(fd.get(), buf, room, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return make_error(std::string("reading: ") + std::strerror(errno));
        if (n == 0) {
            eof = true;
            break;
        }
        received += static_cast<std::size_t>(n);
        auto used = parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        if (!used) {
            if (parser.head_complete()) {
                cut = true;  // e.g. a body over the limit
                break;
            }
            return make_error("not an HTTP answer: " + used.error().message);
        }
    }
    if (eof && !parser.done()) {
        if (Status s = parser.finish_eof(); !s && !parser.head_complete())
            return make_error("not an HTTP answer: " + s.error().message);
        if (!parser.done()) cut = true;
    }
    captive::ProbeAnswer a;
    if (parser.done()) {
        http::Response r = parser.take_response();
        a.status = r.status;
        if (auto loc = r.headers.get("Location")) a.location = std::string(*loc);
        a.body = std::string(r.body.reveal_text());
    } else {
        const http::Response& r = parser.head();
        a.status = r.status;
        if (auto loc = r.headers.get("Location")) a.location = std::string(*loc);
        a.truncated = true;
    }
    a.truncated = a.truncated || cut;
    return a;
}

}  // namespace espvpn::io
