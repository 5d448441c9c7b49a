// --trusted-server (docs/SERVICE.md): the certificate a TLS server presents, fetched
// within a time bound. No trust decision here: the caller compares the fingerprints with
// its pin (server_pin.h); nothing is sent after the handshake.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "protocols/base/result.h"
#include "src/io/server_pin.h"

namespace espvpn::io {

// Connects to `host` (a name through the host's resolver, or an IP literal) on `port`,
// makes a TLS handshake (SNI: `host` when it is a name) and returns the fingerprints of
// the server's own certificate. Connecting and the handshake end after `budget` each at
// most; the name lookup is bounded by the resolver only (the caller bounds the whole).
Result<ServerFingerprints> probe_server_certificate(const std::string& host, std::uint16_t port,
                                                    std::chrono::milliseconds budget);

}  // namespace espvpn::io
