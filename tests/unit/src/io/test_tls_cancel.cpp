// TlsStream's cancel fd: a connection attempt stalled in the TLS handshake (a
// loopback listener that never answers) ends as soon as another thread signals
// the CancelEvent, not at its I/O timeout.
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "src/io/cancel_event.h"
#include "src/io/tls_stream.h"

using namespace espvpn;
using Clock = std::chrono::steady_clock;

namespace {

// A TCP listener on 127.0.0.1 that accepts in the kernel's backlog only: the
// client's TCP connect succeeds, its ClientHello is never answered.
struct SilentListener {
    int fd = -1;
    std::uint16_t port = 0;
    SilentListener() {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(listen(fd, 4) == 0);
        socklen_t len = sizeof a;
        REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port = ntohs(a.sin_port);
    }
    ~SilentListener() { close(fd); }
};

std::shared_ptr<const io::TlsCredentials> credentials(std::chrono::milliseconds io_timeout) {
    io::TlsClientConfig c;
    c.system_trust = false;
    c.io_timeout = io_timeout;
    auto creds = io::TlsCredentials::load(c);
    REQUIRE(creds);
    return *creds;
}

}  // namespace

TEST_CASE("cancel event: readable once cancelled, and stays so") {
    io::CancelEvent e;
    pollfd p{e.fd(), POLLIN, 0};
    CHECK(poll(&p, 1, 0) == 0);
    e.cancel();
    e.cancel();
    CHECK(poll(&p, 1, 0) == 1);
    CHECK(poll(&p, 1, 0) == 1);
}

TEST_CASE("tls connect: a stalled handshake runs into its timeout without a cancel") {
    SilentListener server;
    const auto t0 = Clock::now();
    auto s = io::TlsStream::connect("localhost", server.port, credentials(std::chrono::milliseconds(300)),
                                    io::TlsConnectControl{"127.0.0.1", -1});
    REQUIRE_FALSE(s);
    CHECK(s.error().message.find("timed out in the TLS handshake") != std::string::npos);
    CHECK(Clock::now() - t0 >= std::chrono::milliseconds(300));
}

TEST_CASE("tls connect: the cancel fd ends a stalled handshake at once") {
    SilentListener server;
    io::CancelEvent cancel;
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        cancel.cancel();
    });
    const auto t0 = Clock::now();
    auto s = io::TlsStream::connect("localhost", server.port, credentials(std::chrono::seconds(30)),
                                    io::TlsConnectControl{"127.0.0.1", cancel.fd()});
    const auto took = Clock::now() - t0;
    canceller.join();
    REQUIRE_FALSE(s);
    CHECK(s.error().message.find(io::kCancelledMessage) != std::string::npos);
    CHECK(s.error().message.find("TLS handshake") != std::string::npos);
    CHECK(took < std::chrono::seconds(5));  // 30 s without the cancel
}

TEST_CASE("tls connect: an attempt cancelled before it starts does not connect") {
    SilentListener server;
    io::CancelEvent cancel;
    cancel.cancel();
    auto s = io::TlsStream::connect("localhost", server.port, credentials(std::chrono::seconds(30)),
                                    io::TlsConnectControl{"127.0.0.1", cancel.fd()});
    REQUIRE_FALSE(s);
    CHECK(s.error().message.find(io::kCancelledMessage) != std::string::npos);
}
