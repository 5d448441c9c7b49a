// The socket side of --proxy: on a TCP connection to the proxy, asks it for a
// tunnel to the VPN server (HTTP CONNECT or SOCKS5), so the TLS handshake that
// follows goes end to end. Used by TlsStream::connect; the messages are built and
// parsed in protocols/proxy (sans-IO). Every wait is bounded and cancellable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "protocols/base/result.h"
#include "protocols/proxy/proxy.h"

namespace espvpn::io {

struct ProxySettings {
    proxy::ProxySpec spec;
    std::string no_proxy;       // hosts reached directly (no_proxy syntax)
    bool basic_auth = false;    // --proxy-auth lists Basic (off by default, as in openconnect: clear text)
};

// Runs the proxy's handshake on `fd` (connected to the proxy, non-blocking) for
// host:port. Errors say what the proxy answered, never the password.
Status open_proxy_tunnel(int fd, const ProxySettings& proxy, const std::string& host, std::uint16_t port,
                         std::chrono::milliseconds timeout, int cancel_fd);

}  // namespace espvpn::io
