#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>

#include "src/io/tls_probe.h"

using namespace espvpn;
using namespace std::chrono_literals;

namespace {

// A TCP listener on 127.0.0.1 (any port); the probe never gets past its connection here.
struct Listener {
    io::UniqueFd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    std::uint16_t port = 0;
    Listener() {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd.get(), 4) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port = ntohs(a.sin_port);
    }
    bool connected_to() const {
        pollfd p{fd.get(), POLLIN, 0};
        return ::poll(&p, 1, 0) == 1;
    }
};

io::UniqueFd tcp_socket(int family) { return io::UniqueFd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)); }

}  // namespace

TEST_CASE("trusted-server probe around a tunnel: a socket not bound to a device, or bound to the tun, is not used") {
    Listener server;
    io::TlsProbeRoute route;
    route.v4 = tcp_socket(AF_INET);  // unbound: it would follow the main table, i.e. the tunnel's routes
    route.avoid_device = "tun-x";
    auto r = io::probe_server_certificate("127.0.0.1", server.port, 2s, std::move(route));
    REQUIRE(!r);
    CHECK(r.error().message.find("no way around the tunnel") != std::string::npos);
    CHECK(!server.connected_to());

    io::TlsProbeRoute on_tun;
    on_tun.v4 = tcp_socket(AF_INET);
    REQUIRE(::setsockopt(on_tun.v4.get(), SOL_SOCKET, SO_BINDTODEVICE, "lo", 2) == 0);
    on_tun.avoid_device = "lo";  // stands for the tun
    r = io::probe_server_certificate("127.0.0.1", server.port, 2s, std::move(on_tun));
    REQUIRE(!r);
    CHECK(r.error().message.find("no way around the tunnel") != std::string::npos);
    CHECK(!server.connected_to());

    // Bound to another device: used (the listener sees the connection; it never answers TLS).
    io::TlsProbeRoute around;
    around.v4 = tcp_socket(AF_INET);
    REQUIRE(::setsockopt(around.v4.get(), SOL_SOCKET, SO_BINDTODEVICE, "lo", 2) == 0);
    around.avoid_device = "tun-x";
    r = io::probe_server_certificate("127.0.0.1", server.port, 200ms, std::move(around));
    CHECK(!r);
    CHECK(server.connected_to());
}

TEST_CASE("trusted-server probe around a tunnel: no socket of the address's family, no connection made here") {
    Listener server;
    io::TlsProbeRoute route;
    route.v6 = tcp_socket(AF_INET6);  // only an IPv6 one: the IPv4 server is not asked on a socket of our own
    auto r = io::probe_server_certificate("127.0.0.1", server.port, 2s, std::move(route));
    REQUIRE(!r);
    CHECK(r.error().message.find("no socket around the tunnel") != std::string::npos);
    CHECK(!server.connected_to());
}
