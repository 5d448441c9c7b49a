// --trusted-server (docs/SERVICE.md): the certificate a TLS server presents, fetched
// within a time bound. No trust decision here: the caller compares the fingerprints with
// its pin (server_pin.h); nothing is sent after the handshake.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "protocols/base/result.h"
#include "src/io/server_pin.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

// Connects to `host` (a name through the host's resolver, or an IP literal) on `port`,
// makes a TLS handshake (SNI: `host` when it is a name) and returns the fingerprints of
// the server's own certificate. Connecting and the handshake end after `budget` each at
// most; the name lookup is bounded by the resolver only (the caller bounds the whole).
// `route`: while a tunnel is up, the sockets to use (made by the privileged side so that they
// take the way around the tunnel: Host::open_probe_socket), one per family, each used once; no
// other socket is made then (an address of a family without one is skipped). A socket that is
// not bound to a device (SO_BINDTODEVICE), or is bound to `avoid_device` (the tun), is not
// used: its packets could take the tunnel, and the answer would come from inside it.
struct TlsProbeRoute {
    UniqueFd v4, v6;
    std::string avoid_device;
    bool given() const { return v4.valid() || v6.valid(); }
};
Result<ServerFingerprints> probe_server_certificate(const std::string& host, std::uint16_t port,
                                                    std::chrono::milliseconds budget, TlsProbeRoute route = {});

}  // namespace espvpn::io
