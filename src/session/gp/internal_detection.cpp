#include "src/session/gp/internal_detection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace espvpn::session {

namespace {

// Shared with the lookup threads, which may outlive the call.
struct LookupBoard {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<std::optional<Result<std::string>>> answers;  // nullopt: no answer yet
    std::size_t finished = 0;
};

std::string seconds_text(std::chrono::milliseconds budget) {
    const auto ms = budget.count();
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
    return std::to_string(ms) + " ms";
}

}  // namespace

Result<std::string> resolver_reverse_lookup(const std::string& address) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        len = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        len = sizeof(sockaddr_in6);
    } else {
        return make_error("not an IP address");
    }
    char host[NI_MAXHOST];
    int rc = getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, nullptr, 0, NI_NAMEREQD);
    if (rc != 0) return make_error(gai_strerror(rc));
    return std::string(host);
}

InternalVerdict detect_internal_network(const std::vector<gp::GpInternalHostCheck>& checks,
                                        std::chrono::milliseconds budget, ReverseLookup lookup) {
    auto board = std::make_shared<LookupBoard>();
    board->answers.resize(checks.size());
    for (std::size_t i = 0; i < checks.size(); ++i) {
        std::thread([board, i, address = checks[i].address, lookup] {
            auto answer = lookup(address);
            std::lock_guard lock(board->mutex);
            board->answers[i] = std::move(answer);
            ++board->finished;
            board->done.notify_all();
        }).detach();
    }
    std::vector<std::optional<Result<std::string>>> answers;
    {
        std::unique_lock lock(board->mutex);
        auto matched = [&] {
            for (std::size_t i = 0; i < checks.size(); ++i)
                if (board->answers[i] && *board->answers[i] &&
                    gp::internal_host_matches(checks[i].host, **board->answers[i]))
                    return true;
            return false;
        };
        board->done.wait_for(lock, budget, [&] { return board->finished == checks.size() || matched(); });
        answers = board->answers;  // late answers land on the board, no longer read
    }
    InternalVerdict v;
    std::string why;
    for (std::size_t i = 0; i < checks.size(); ++i) {
        const auto& c = checks[i];
        const auto& a = answers[i];
        if (a && *a && gp::internal_host_matches(c.host, **a)) {
            v.inside = true;
            v.reason = "inside the corporate network: " + c.address + " resolves to " + **a;
            return v;
        }
        if (!why.empty()) why += "; ";
        if (!a) why += "no answer for " + c.address + " within " + seconds_text(budget);
        else if (!*a) why += c.address + " has no name (" + a->error().message + "), expected " + c.host;
        else why += c.address + " resolves to " + **a + ", expected " + c.host;
    }
    v.reason = "outside the corporate network: " + why;
    return v;
}

}  // namespace espvpn::session
