// --gateway-select=latency: measure how long a TLS connect (TCP + handshake,
// same trust rules as the login) takes to each gateway, all at once, and give
// up on the ones that have not finished within the budget.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/io/tls_stream.h"

namespace espvpn::session {

struct GatewayLatency {
    std::string address;                                   // "host" or "host:port"
    std::optional<std::chrono::nanoseconds> connect_time;  // nullopt: failed or too slow
    std::string error;                                     // why there is no time
};

// One result per address, in the same order. Returns within about `budget`;
// probes still running then keep going in the background until their own
// connect/handshake timeouts end them, and are reported as too slow.
std::vector<GatewayLatency> probe_gateway_latency(const std::vector<std::string>& addresses,
                                                  std::shared_ptr<const io::TlsCredentials> credentials,
                                                  std::chrono::milliseconds budget);

}  // namespace espvpn::session
