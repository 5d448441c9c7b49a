#include "src/io/http_probe.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocols/http/response_parser.h"
#include "src/io/tls_stream.h"
#include "src/io/unique_fd.h"

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

}  // namespace

Result<captive::ProbeAnswer> http_probe(const captive::HttpUrl& url, std::chrono::milliseconds timeout, int cancel_fd) {
    const Clock::time_point deadline = Clock::now() + timeout;
    auto connected = tcp_connect(url.host, url.port, timeout, cancel_fd);
    if (!connected) return connected.error();
    UniqueFd fd(*connected);
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
