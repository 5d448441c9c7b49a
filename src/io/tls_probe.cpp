#include "src/io/tls_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "src/io/unique_fd.h"

namespace espvpn::io {

namespace {

bool is_ip_literal(const std::string& host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The device a socket is bound to (SO_BINDTODEVICE; "" when none).
std::string bound_device(int fd) {
    char name[IF_NAMESIZE + 1] = {};
    socklen_t len = IF_NAMESIZE;
    if (::getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, name, &len) != 0) return {};
    return std::string(name, ::strnlen(name, std::min<std::size_t>(len, IF_NAMESIZE)));
}

// A TCP connection to one of `host`'s addresses within `budget` (on `route`'s sockets when given).
Result<UniqueFd> connect_within(const std::string& host, std::uint16_t port, std::chrono::milliseconds budget,
                                TlsProbeRoute& route) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
        return make_error("cannot resolve " + host + ": " + gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
    const auto end = std::chrono::steady_clock::now() + budget;
    std::string why = "no address";
    const bool given = route.given();
    for (addrinfo* a = found; a; a = a->ai_next) {
        UniqueFd fd;
        if (given) {
            UniqueFd* own = a->ai_family == AF_INET ? &route.v4 : a->ai_family == AF_INET6 ? &route.v6 : nullptr;
            if (!own || !own->valid()) {
                why = "no socket around the tunnel for this address";
                continue;
            }
            fd = std::move(*own);
            const std::string device = bound_device(fd.get());
            if (device.empty() || device == route.avoid_device) {
                why = "no way around the tunnel (no default route outside it)";
                continue;
            }
        } else {
            fd.reset(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
        }
        if (!fd.valid()) return make_error(std::string("socket: ") + std::strerror(errno));
        if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            why = std::strerror(errno);
            continue;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) return make_error("no connection within " + std::to_string(budget.count()) + " ms");
        pollfd p{fd.get(), POLLOUT, 0};
        int n;
        do n = ::poll(&p, 1, static_cast<int>(left.count()));
        while (n < 0 && errno == EINTR);
        if (n == 0) return make_error("no connection within " + std::to_string(budget.count()) + " ms");
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (n < 0 || err != 0) {
            why = std::strerror(n < 0 ? errno : err);
            continue;
        }
        return fd;
    }
    return make_error("cannot connect: " + why);
}

}  // namespace

Result<ServerFingerprints> probe_server_certificate(const std::string& host, std::uint16_t port,
                                                    std::chrono::milliseconds budget, TlsProbeRoute route) {
    auto fd = connect_within(host, port, budget, route);
    if (!fd) return fd.error();
    // Blocking from here on: gnutls waits in its own poll, bounded by the handshake timeout.
    ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) & ~O_NONBLOCK);
    gnutls_certificate_credentials_t cred = nullptr;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) return make_error("TLS: out of memory");
    std::unique_ptr<gnutls_certificate_credentials_st, decltype(&gnutls_certificate_free_credentials)> cred_owner(
        cred, gnutls_certificate_free_credentials);
    gnutls_session_t session = nullptr;
    if (gnutls_init(&session, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL) < 0) return make_error("TLS: out of memory");
    std::unique_ptr<gnutls_session_int, decltype(&gnutls_deinit)> session_owner(session, gnutls_deinit);
    gnutls_set_default_priority(session);
    gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, cred);
    if (!is_ip_literal(host)) gnutls_server_name_set(session, GNUTLS_NAME_DNS, host.data(), host.size());
    gnutls_transport_set_int(session, fd->get());
    gnutls_handshake_set_timeout(session, static_cast<unsigned>(budget.count()));
    int rc;
    do rc = gnutls_handshake(session);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0) return make_error(std::string("TLS handshake: ") + gnutls_strerror(rc));
    unsigned count = 0;
    const gnutls_datum_t* chain = gnutls_certificate_get_peers(session, &count);
    if (!chain || count == 0) return make_error("the server sent no certificate");
    return fingerprints_of(chain[0]);
}

}  // namespace espvpn::io
