// GlobalProtect's periodic HIP: gateways that enforce host information end the session
// when the report is not renewed. While the tunnel runs, the HIP check (and the report
// when the gateway asks for one) is made again every period, and at once after every
// reconnect and rekey (a new getconfig), on a thread of its own with its own HTTPS
// connection to the gateway: neither the datapath threads nor the session's control loop
// ever wait for the gateway or the --csd-wrapper program. A failure (the gateway, the
// wrapper failing or hanging past its timeout) is logged and retried with a bounded
// backoff; the tunnel stays up. A refused cookie is reported to the control loop (the
// session is over). The destructor cancels a check in flight (its HTTPS waits and the
// wrapper end at once).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "src/io/cancel_event.h"
#include "src/session/gp/tunnel_setup.h"

namespace espvpn::session {

// openconnect's default when neither --force-trojan nor the portal sets an interval.
constexpr unsigned kDefaultHipIntervalS = 3600;

// Seconds between two HIP checks: --force-trojan when > 0 (as given, like openconnect);
// else the portal's hip-report-interval, else the gateway's, else 3600 s; a minute before
// the interval ends (openconnect's "interval - 60"), half of it for intervals of 2 min or less.
unsigned hip_period_s(unsigned force_trojan_s, std::optional<unsigned> portal_interval_s,
                      unsigned gateway_interval_s);

// When the next check is due (sans-IO: the thread below runs it on the steady clock).
class HipSchedule {
public:
    using Clock = std::chrono::steady_clock;
    HipSchedule(std::chrono::seconds period, Clock::time_point now,
                std::chrono::seconds retry_min = std::chrono::seconds(5),
                std::chrono::seconds retry_max = std::chrono::seconds(60));
    Clock::time_point next() const { return next_; }
    void due_now(Clock::time_point now) { next_ = now; }
    void succeeded(Clock::time_point now);
    // After a failure: the delay before the retry (doubling from retry_min, at most
    // retry_max and never longer than the period).
    std::chrono::seconds failed(Clock::time_point now);
    unsigned failures() const { return failures_; }

private:
    std::chrono::seconds period_, retry_min_, retry_max_;
    Clock::time_point next_;
    unsigned failures_ = 0;
};

struct HipRenewalPlan {
    GpGatewaySession* gateway = nullptr;  // its own HttpsClient: used by the renewal thread only
    GpHipSettings hip;
    std::chrono::seconds period{kDefaultHipIntervalS - 60};
};

class HipRenewal {
public:
    // Starts the thread; the first check is due one period from now (the login's was just made).
    HipRenewal(HipRenewalPlan plan, std::string ip, std::string ip6);
    ~HipRenewal();
    HipRenewal(const HipRenewal&) = delete;
    HipRenewal& operator=(const HipRenewal&) = delete;

    // A new getconfig (reconnect, rekey): check again now, with the tunnel addresses it gave.
    void renew_now(const std::string& why, const std::string& ip, const std::string& ip6);
    // Set once the gateway refused the session cookie: the session is over (`why`).
    bool cookie_rejected() const { return rejected_; }
    std::string rejection() const;
    unsigned reports_sent() const { return reports_; }

private:
    void run();

    HipRenewalPlan plan_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    HipSchedule schedule_;
    std::string ip_, ip6_, why_ = "interval";
    bool stop_ = false;
    bool busy_ = false;              // a check runs (the thread has let go of the lock)
    bool fresh_connection_ = false;  // close the kept-alive connection before the next check
    std::string rejection_;
    std::atomic<bool> rejected_{false};
    std::atomic<unsigned> reports_{0};
    io::CancelEvent cancel_;  // ends the HTTPS waits and the wrapper of a check in flight
    std::thread thread_;      // last: starts once everything above exists
};

}  // namespace espvpn::session
