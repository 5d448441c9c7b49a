#include "src/session/gp/gateway_latency.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "protocols/http/url.h"

namespace espvpn::session {

namespace {

// Shared with the probe threads, which may outlive the call (not its owner).
struct ProbeBoard {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<GatewayLatency> results;
    std::size_t finished = 0;
    bool closed = false;  // the caller has its answer; late probes only count
};

}  // namespace

LatencyProbeThreads::~LatencyProbeThreads() {
    for (auto& t : threads_)
        if (t.joinable()) t.join();
}

std::vector<GatewayLatency> probe_gateway_latency(const std::vector<std::string>& addresses,
                                                  std::shared_ptr<const io::TlsCredentials> credentials,
                                                  std::chrono::milliseconds budget, LatencyProbeThreads& threads) {
    auto board = std::make_shared<ProbeBoard>();
    board->results.resize(addresses.size());
    for (std::size_t i = 0; i < addresses.size(); ++i) {
        board->results[i].address = addresses[i];
        board->results[i].error = "no TLS connect within " + std::to_string(budget.count()) + " ms";
    }
    for (std::size_t i = 0; i < addresses.size(); ++i) {
        threads.add(std::thread([board, credentials, i, address = addresses[i]] {
            GatewayLatency r{address, std::nullopt, {}};
            auto url = http::parse_url(address);
            if (!url) {
                r.error = url.error().message;
            } else {
                const auto start = std::chrono::steady_clock::now();
                auto stream = io::TlsStream::connect(url->host, url->port, credentials);
                if (stream) {
                    r.connect_time = std::chrono::steady_clock::now() - start;
                    (*stream)->close();
                } else {
                    r.error = stream.error().message;
                }
            }
            std::lock_guard lock(board->mutex);
            if (!board->closed) board->results[i] = std::move(r);
            ++board->finished;
            board->done.notify_all();
        }));
    }
    std::unique_lock lock(board->mutex);
    board->done.wait_for(lock, budget, [&] { return board->finished == addresses.size(); });
    auto results = board->results;
    board->closed = true;
    return results;
}

}  // namespace espvpn::session
