#include "src/session/tunnel_session.h"

#include <poll.h>

#include <optional>

#include "src/log/logger.h"
#include "src/session/signal_watch.h"

namespace espvpn::session {

namespace {

using Clock = std::chrono::steady_clock;

void write_log(const LogLine& line) {
    switch (line.level) {
        case log::Level::error: LOG_ERROR << line.text; break;
        case log::Level::warn: LOG_WARN << line.text; break;
        case log::Level::info: LOG_INFO << line.text; break;
        default: LOG_DEBUG << line.text; break;
    }
}

class SessionLoop {
public:
    SessionLoop(SessionDriver& driver, const TunnelOptions& options, host::TunnelHost& host)
        : d_(driver), o_(options), host_(host), control_(driver.peer(), options.reconnect_timeout, driver.attempt_text()) {}

    void apply(SessionActions a) {
        for (const LogLine& line : a.log) write_log(line);
        for (host::ScriptReason reason : a.scripts) host_.queue_script(reason);  // not awaited
        if (a.drop_link) d_.drop_link();
        if (a.outage_ended) d_.outage_ended(*a.outage_ended);
        if (a.start_attempt && !end_) attempt_ = d_.begin_attempt(*a.start_attempt);
        if (a.first_up && o_.on_connected) o_.on_connected();
        if (a.end && !end_) end_ = a.end;
    }

    void apply(const LinkEvent& e) {
        const Clock::time_point now = Clock::now();
        switch (e.kind) {
            case LinkEvent::Kind::up: apply(control_.link_up(now, e.text, e.suffix)); break;
            case LinkEvent::Kind::lost: apply(control_.link_lost(now, e.text)); break;
            case LinkEvent::Kind::ended: apply(control_.link_ended(e.end, e.text)); break;
            case LinkEvent::Kind::renew: apply(control_.renew(e.purpose, e.text, e.scripts)); break;
        }
    }

    // `first`: the first link's `up`, when start() had it at once.
    TunnelEnd run(SignalWatch& signals, const std::optional<LinkEvent>& first) {
        if (first) apply(*first);
        while (!end_) {
            // A new link is made on its own thread: signals are served meanwhile, and its end wakes us.
            pollfd p[2] = {{signals.fd(), POLLIN, 0}, {attempt_ ? attempt_->done_fd() : -1, POLLIN, 0}};
            poll(p, 2, d_.poll_ms());
            for (int sig; !end_ && (sig = signals.next()) != 0;)
                apply(control_.signal(sig, Clock::now(), d_.renew_blocked()));
            if (!end_ && attempt_ && attempt_->done()) {
                attempt_->wait();
                AttemptResult r = d_.finish_attempt(control_.attempt_purpose(), control_.in_outage(), control_.attempt_why());
                attempt_.reset();
                apply(control_.attempt_finished(Clock::now(), r));
            }
            if (!end_) apply(control_.tick(Clock::now()));
            if (end_) break;
            for (const LinkEvent& e : d_.step(Clock::now(), control_)) {
                apply(e);
                if (end_) break;
            }
        }
        if (attempt_) {
            // Cancelled, not awaited: its waits end at once, whatever the server does.
            const Clock::time_point t0 = Clock::now();
            attempt_.reset();
            LOG_INFO << "the connection attempt in progress (" << control_.attempt_why() << ") cancelled in "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count() << " ms";
        }
        return *end_;
    }

    std::optional<TunnelEnd> end_;

private:
    SessionDriver& d_;
    const TunnelOptions& o_;
    host::TunnelHost& host_;
    SessionControl control_;
    std::unique_ptr<LinkAttempt> attempt_;
};

}  // namespace

Result<TunnelEnd> run_tunnel_session(SessionDriver& d, const TunnelOptions& o) {
    // Signals are blocked before any thread starts, so every thread inherits the mask.
    SignalWatch signals;
    auto plan = d.prepare();
    if (!plan) return plan.error();
    if (const TunnelEnd* end = std::get_if<TunnelEnd>(&*plan)) return *end;
    const auto& hp = std::get<SessionDriver::HostPlan>(*plan);

    host::TunnelHost host(o.host);
    // Whatever happens next, the driver's links stop before the host (and its tun) goes.
    struct StopLinks {
        SessionDriver& d;
        ~StopLinks() { d.stop(); }
    };
    if (Status s = host.bring_up(hp.config, hp.mtu); !s) return s.error();
    StopLinks stop_links{d};
    SessionLoop loop(d, o, host);
    auto started = d.start(host);
    if (!started) return started.error();
    if (*started && (*started)->kind == LinkEvent::Kind::ended) return (*started)->end;
    if (o.after_setup) {
        if (Status s = o.after_setup(); !s) return s.error();
    }
    datapath::StatsReporterOptions report;
    report.json_path = o.stats_json;
    auto reporter = datapath::StatsReporter::start(d.stats_view(), report);
    if (!reporter) return reporter.error();

    const TunnelEnd end = loop.run(signals, *started);
    if (end == TunnelEnd::user_logout) d.logout();
    // The reporter's last write (--stats-json) while the links still hold their counters.
    reporter->reset();
    return end;
}

}  // namespace espvpn::session
