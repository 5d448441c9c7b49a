// --gateway-select=latency: measure how long a TLS connect (TCP + handshake,
// same trust rules as the login) takes to each gateway, all at once, and give
// up on the ones that have not finished within the budget.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/io/tls_stream.h"

namespace espvpn::session {

struct GatewayLatency {
    std::string address;                                   // "host" or "host:port"
    std::optional<std::chrono::nanoseconds> connect_time;  // nullopt: failed or too slow
    std::string error;                                     // why there is no time
};

// Probe threads still running when the answer was due. They end on their own
// connect/handshake timeouts (give the probe credentials short ones); the
// destructor waits for them so none outlives its owner.
class LatencyProbeThreads {
public:
    ~LatencyProbeThreads();
    void add(std::thread t) { threads_.push_back(std::move(t)); }

private:
    std::vector<std::thread> threads_;
};

// One result per address, in the same order, within about `budget`.
std::vector<GatewayLatency> probe_gateway_latency(const std::vector<std::string>& addresses,
                                                  std::shared_ptr<const io::TlsCredentials> credentials,
                                                  std::chrono::milliseconds budget, LatencyProbeThreads& threads);

}  // namespace espvpn::session
