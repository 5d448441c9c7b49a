// The captive-portal probe's GET against hostile answers on loopback: a huge or endless body,
// a dribbling or silent server, junk, control characters in Location. Each is bounded (time,
// bytes) and ends in an answer or an error, never a hang.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "src/io/cancel_event.h"
#include "src/io/http_probe.h"

using namespace espvpn;
using namespace std::chrono_literals;

namespace {

// One connection on 127.0.0.1, served by `serve(fd)` on a thread once the request arrived.
class OneShotServer {
public:
    explicit OneShotServer(std::function<void(int)> serve) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_, 4) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this, serve = std::move(serve)] {
            const int c = ::accept(fd_, nullptr, nullptr);
            if (c < 0) return;
            char buf[2048];
            std::string req;
            while (req.find("\r\n\r\n") == std::string::npos) {
                const ssize_t n = ::read(c, buf, sizeof buf);
                if (n <= 0) break;
                req.append(buf, static_cast<std::size_t>(n));
            }
            request = req;
            serve(c);
            ::close(c);
        });
    }
    ~OneShotServer() {
        ::shutdown(fd_, SHUT_RDWR);
        stop = true;
        thread_.join();
        ::close(fd_);
    }
    captive::HttpUrl url() const {
        return captive::parse_http_url("http://127.0.0.1:" + std::to_string(port_) + "/check.txt").value();
    }
    std::string request;
    std::atomic<bool> stop{false};

private:
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

void send_all(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
    }
}

}  // namespace

TEST_CASE("http probe: a plain GET, the answer's status, Location and body") {
    OneShotServer server([](int c) {
        send_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 25\r\nConnection: close\r\n\r\nNetworkManager is online\n");
    });
    auto a = io::http_probe(server.url(), 5000ms);
    REQUIRE(a.ok());
    CHECK(a->status == 200);
    CHECK(a->body == "NetworkManager is online\n");
    CHECK_FALSE(a->truncated);
    CHECK(server.request.rfind("GET /check.txt HTTP/1.1\r\n", 0) == 0);
    CHECK(server.request.find("\r\nHost: 127.0.0.1:") != std::string::npos);
    CHECK(server.request.find("Cookie") == std::string::npos);
}

TEST_CASE("http probe: a redirect with control characters in Location is read, then made printable") {
    OneShotServer server([](int c) {
        send_all(c, "HTTP/1.1 302 Found\r\nLocation: http://portal.example/\x1b[31m\x07x\r\nContent-Length: 0\r\n\r\n");
    });
    auto a = io::http_probe(server.url(), 5000ms);
    REQUIRE(a.ok());
    CHECK(a->status == 302);
    const captive::Verdict v = captive::classify(captive::ProbeSpec{server.url(), "ok"}, *a);
    CHECK(v.kind == captive::Verdict::Kind::portal);
    CHECK(v.portal_url == "http://portal.example/%1B[31m%07x");
}

TEST_CASE("http probe: an endless body is cut at kMaxAnswerBytes") {
    OneShotServer server([&](int c) {
        send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n");  // close-delimited
        const std::string chunk(64 * 1024, 'A');
        for (int i = 0; i < 1024 && !server.stop; ++i) send_all(c, chunk);  // up to 64 MiB
    });
    auto a = io::http_probe(server.url(), 5000ms);
    REQUIRE(a.ok());
    CHECK(a->status == 200);
    CHECK(a->truncated);
    CHECK(a->body.size() <= captive::kMaxAnswerBytes);
    CHECK(captive::classify(captive::ProbeSpec{server.url(), "ok"}, *a).kind == captive::Verdict::Kind::portal);
}

TEST_CASE("http probe: a huge Content-Length, a dribbling body, a silent server, junk: bounded") {
    {
        OneShotServer server([](int c) {
            send_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nabc");
        });
        auto a = io::http_probe(server.url(), 3000ms);
        // refused at its head (more than the probe would ever read): no wait for 99 GB
        REQUIRE_FALSE(a.ok());
        CHECK(a.error().message.find("not an HTTP answer") != std::string::npos);
    }
    {
        OneShotServer server([&](int c) {
            send_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
            for (int i = 0; i < 100 && !server.stop; ++i) {
                send_all(c, "x");
                std::this_thread::sleep_for(50ms);
            }
        });
        auto a = io::http_probe(server.url(), 300ms);  // the deadline ends the dribble
        REQUIRE(a.ok());
        CHECK(a->truncated);
        CHECK(captive::classify(captive::ProbeSpec{server.url(), "ok"}, *a).kind == captive::Verdict::Kind::portal);
    }
    {
        OneShotServer server([&](int) {
            while (!server.stop) std::this_thread::sleep_for(10ms);
        });
        auto a = io::http_probe(server.url(), 300ms);
        REQUIRE_FALSE(a.ok());
        CHECK(a.error().message.find("no answer in time") != std::string::npos);
    }
    {
        OneShotServer server([](int c) { send_all(c, "\x16\x03\x01 not http at all\r\n\r\n"); });
        auto a = io::http_probe(server.url(), 3000ms);
        CHECK_FALSE(a.ok());
    }
}

TEST_CASE("http probe: the cancel fd ends a silent wait at once") {
    OneShotServer server([&](int) {
        while (!server.stop) std::this_thread::sleep_for(10ms);
    });
    io::CancelEvent cancel;
    std::thread canceller([&] {
        std::this_thread::sleep_for(100ms);
        cancel.cancel();
    });
    auto a = io::http_probe(server.url(), 60000ms, cancel.fd());
    canceller.join();
    REQUIRE_FALSE(a.ok());
    CHECK(a.error().message == "cancelled");
}

TEST_CASE("http probe: given sockets and addresses are used; nothing listening is an error") {
    io::ProbeRoute route;
    route.addresses = {"127.0.0.1"};
    route.v4 = io::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    // a port nobody listens on (bound, then closed)
    int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(probe);
    auto url = captive::parse_http_url("http://nowhere.invalid:" + std::to_string(ntohs(a.sin_port)) + "/").value();
    auto r = io::http_probe(url, 2000ms, -1, std::move(route));  // no lookup of nowhere.invalid: the address given
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("127.0.0.1: Connection refused") != std::string::npos);
}
