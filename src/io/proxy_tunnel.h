// The socket side of --proxy: on a TCP connection to the proxy, asks it for a
// tunnel to the VPN server (HTTP CONNECT or SOCKS5), so the TLS handshake that
// follows goes end to end. Used by TlsStream::connect; the messages are built and
// parsed in protocols/proxy (sans-IO). Every wait is bounded and cancellable.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "protocols/base/result.h"
#include "protocols/proxy/proxy.h"

namespace espvpn::io {

struct ProxySettings {
    proxy::ProxySpec spec;
    std::string no_proxy;       // hosts reached directly (no_proxy syntax)
    proxy::ProxyAuthMethods auth;  // --proxy-auth (default: NTLM, not Basic, as in openconnect)
};

// Runs the proxy's handshake on `fd` (connected to the proxy, non-blocking) for
// host:port, authenticating as the proxy asks (protocols/proxy/connect_auth.h). When
// the proxy closes the connection after a refusal, `connect_proxy` opens a new one
// and `fd` is replaced (the old one closed). Errors say what the proxy answered,
// never the password.
Status open_proxy_tunnel(int& fd, const ProxySettings& proxy, const std::string& host, std::uint16_t port,
                         std::chrono::milliseconds timeout, int cancel_fd,
                         const std::function<Result<int>()>& connect_proxy);

}  // namespace espvpn::io
