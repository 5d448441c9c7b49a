#include "src/session/captive_portal.h"

#include <atomic>
#include <mutex>
#include <thread>

#include "src/io/cancel_event.h"
#include "src/io/http_probe.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::session {

captive::Verdict probe_for_captive_portal(const captive::ProbeSpec& spec, int cancel_fd, io::ProbeRoute route) {
    auto answer = io::http_probe(spec.url, kProbeTimeout, cancel_fd, std::move(route));
    if (!answer) {
        captive::Verdict v;
        v.why = captive::printable_url(answer.error().message);
        return v;
    }
    return captive::classify(spec, *answer);
}

struct ProbeAddresses::Shared {
    mutable std::mutex mu;
    std::vector<std::string> addresses;
};

ProbeAddresses::ProbeAddresses(const captive::ProbeSpec& spec) : shared_(std::make_shared<Shared>()) {
    if (normalise_ip(spec.url.host)) shared_->addresses.push_back(spec.url.host);
    else host_ = spec.url.host;
}

void ProbeAddresses::look_up() {
    if (host_.empty()) return;
    std::thread([shared = shared_, host = host_] {
        auto found = io::resolve_probe_host(host);  // nothing logged here: the process may be exiting
        if (!found || found->empty()) return;
        std::lock_guard lock(shared->mu);
        shared->addresses = std::move(*found);
    }).detach();
}

std::vector<std::string> ProbeAddresses::get() const {
    std::lock_guard lock(shared_->mu);
    return shared_->addresses;
}

struct BackgroundProbe::Shared {
    io::CancelEvent cancel;
    io::CancelEvent done;
    std::atomic<bool> finished{false};
    mutable std::mutex mu;
    captive::Verdict verdict;
};

BackgroundProbe::BackgroundProbe(const captive::ProbeSpec& spec, io::ProbeRoute route)
    : shared_(std::make_shared<Shared>()) {
    std::thread([shared = shared_, spec, route = std::move(route)]() mutable {
        captive::Verdict v = probe_for_captive_portal(spec, shared->cancel.fd(), std::move(route));
        {
            std::lock_guard lock(shared->mu);
            shared->verdict = std::move(v);
        }
        shared->finished = true;
        shared->done.cancel();
    }).detach();
}

BackgroundProbe::~BackgroundProbe() { shared_->cancel.cancel(); }

int BackgroundProbe::done_fd() const { return shared_->done.fd(); }
bool BackgroundProbe::done() const { return shared_->finished; }

captive::Verdict BackgroundProbe::verdict() const {
    std::lock_guard lock(shared_->mu);
    return shared_->verdict;
}

}  // namespace espvpn::session
