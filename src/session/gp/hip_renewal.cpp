#include "src/session/gp/hip_renewal.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "src/log/logger.h"
#include "src/session/reconnect_policy.h"

namespace espvpn::session {

using Clock = std::chrono::steady_clock;

unsigned hip_period_s(unsigned force_trojan_s, std::optional<unsigned> portal_interval_s,
                      unsigned gateway_interval_s) {
    if (force_trojan_s > 0) return force_trojan_s;
    unsigned interval = kDefaultHipIntervalS;
    if (portal_interval_s && *portal_interval_s > 0) interval = *portal_interval_s;
    else if (gateway_interval_s > 0) interval = gateway_interval_s;
    return interval > 120 ? interval - 60 : std::max(1u, interval / 2);
}

HipSchedule::HipSchedule(std::chrono::seconds period, Clock::time_point now, std::chrono::seconds retry_min,
                         std::chrono::seconds retry_max)
    : period_(std::max(period, std::chrono::seconds(1))),
      retry_min_(retry_min),
      retry_max_(retry_max),
      next_(now + period_) {}

void HipSchedule::succeeded(Clock::time_point now) {
    failures_ = 0;
    next_ = now + period_;
}

std::chrono::seconds HipSchedule::failed(Clock::time_point now) {
    ++failures_;
    std::chrono::seconds delay = retry_min_;
    for (unsigned i = 1; i < failures_ && delay < retry_max_; ++i) delay *= 2;
    delay = std::min({delay, retry_max_, period_});
    next_ = now + delay;
    return delay;
}

HipRenewal::HipRenewal(HipRenewalPlan plan, std::string ip, std::string ip6)
    : plan_(std::move(plan)),
      schedule_(plan_.period, Clock::now()),
      ip_(std::move(ip)),
      ip6_(std::move(ip6)),
      thread_([this] { run(); }) {
    LOG_INFO << "HIP: checking again every " << plan_.period.count() << " s and after every reconnect and rekey";
}

HipRenewal::~HipRenewal() {
    bool busy = false;
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        busy = busy_;
    }
    cv_.notify_all();
    cancel_.cancel();
    const Clock::time_point t0 = Clock::now();
    if (thread_.joinable()) thread_.join();
    if (busy)
        LOG_INFO << "HIP: the check in progress cancelled in " << ms_of(Clock::now() - t0) << " ms";
}

void HipRenewal::renew_now(const std::string& why, const std::string& ip, const std::string& ip6) {
    {
        std::lock_guard lock(mu_);
        why_ = why;
        if (!ip.empty()) ip_ = ip;
        ip6_ = ip6;
        fresh_connection_ = true;  // the kept-alive one may come from a source address that is gone
        schedule_.due_now(Clock::now());
    }
    cv_.notify_all();
}

std::string HipRenewal::rejection() const {
    std::lock_guard lock(mu_);
    return rejection_;
}

void HipRenewal::run() {
    // Background work: never at a real-time priority the process may run with (chrt), and
    // niced, so neither the TLS handshake nor the wrapper (which inherits both) competes with
    // the datapath threads for a core. Lowering a thread's own priority needs no privilege.
    sched_param normal{};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
    io::HttpsClient& https = plan_.gateway->https();
    https.set_cancel_fd(cancel_.fd());
    // A check takes no longer than its period (it would miss its turn anyway), within 5-30 s.
    GpHipSettings hip = plan_.hip;
    hip.wrapper_timeout = std::clamp(plan_.period, std::chrono::seconds(5), hip.wrapper_timeout);
    hip.cancel_fd = cancel_.fd();
    std::unique_lock lock(mu_);
    while (!stop_) {
        const Clock::time_point due = schedule_.next();
        if (Clock::now() < due) {
            cv_.wait_until(lock, due);
            continue;
        }
        const std::string ip = ip_, ip6 = ip6_, why = std::exchange(why_, "interval");
        const bool fresh = std::exchange(fresh_connection_, false);
        busy_ = true;
        lock.unlock();
        if (fresh) https.close_all();
        LOG_INFO << "HIP: check due (" << why << ")";
        auto sent = plan_.gateway->check_hip(ip, ip6, hip);
        lock.lock();
        busy_ = false;
        if (stop_) break;  // cancelled: the error is ours, not the gateway's
        const Clock::time_point now = Clock::now();
        if (sent) {
            schedule_.succeeded(now);
            if (*sent) ++reports_;
            continue;
        }
        if (plan_.gateway->cookie_rejected()) {
            rejection_ = "HIP: " + sent.error().message;
            rejected_ = true;
            break;
        }
        const std::chrono::seconds delay = schedule_.failed(now);
        LOG_WARN << "HIP: " << sent.error().message << "; trying again in " << delay.count()
                 << " s (failure " << schedule_.failures() << " in a row; the tunnel stays up)";
    }
    lock.unlock();
    https.set_cancel_fd(-1);  // the CancelEvent goes with this object, the client stays
}

}  // namespace espvpn::session
