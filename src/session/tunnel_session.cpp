#include "src/session/tunnel_session.h"

#include <poll.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>

#include "src/io/route_watch.h"
#include "src/io/sleep_watch.h"
#include "src/log/logger.h"
#include "src/session/captive_portal.h"
#include "src/session/domain_split.h"
#include "src/session/path_rule.h"
#include "src/session/signal_watch.h"
#include "src/session/status_server.h"

namespace espvpn::session {

namespace {

using Clock = std::chrono::steady_clock;

class SessionLoop {
public:
    SessionLoop(SessionDriver& driver, const TunnelOptions& options, host::Host& host)
        : d_(driver), o_(options), host_(host),
          control_(driver.peer(), options.reconnect_timeout, driver.attempt_text(), options.always_on) {
        if (options.captive_probe) probe_addresses_.emplace(*options.captive_probe);
    }

    void apply(SessionActions a) {
        for (const LogLine& line : a.log)
            if (log::enabled(line.level)) log::Line(line.level) << line.text;
        for (host::ScriptReason reason : a.scripts) host_.queue_script(reason);  // not awaited
        if (a.drop_link) d_.drop_link();
        if (a.cancel_attempt && attempt_) attempt_->cancel();  // its end comes through done_fd as usual
        if (a.outage_ended) d_.outage_ended(*a.outage_ended);
        if (a.start_attempt && !end_) attempt_ = d_.begin_attempt(*a.start_attempt);
        if (a.first_up) {
            if (o_.on_connected) o_.on_connected();
            carried_ = true;
        }
        // The tunnel carries (first, or after an outage): its DNS finds the captive-portal
        // probe's host for a later outage.
        if ((a.first_up || a.outage_ended) && probe_addresses_) probe_addresses_->look_up();
        if (a.end && !end_) end_ = a.end;
    }

    void apply(const LinkEvent& e) {
        const Clock::time_point now = Clock::now();
        switch (e.kind) {
            case LinkEvent::Kind::up:
                apply(control_.link_up(now, e.text, e.suffix));
                path_.set_local(io::local_address_for(d_.path_peer()));
                break;
            case LinkEvent::Kind::lost:
                if (o_.status_board) o_.status_board->set_error(e.text);
                apply(control_.link_lost(now, e.text));
                break;
            case LinkEvent::Kind::ended: apply(control_.link_ended(e.end, e.text)); break;
            case LinkEvent::Kind::renew: apply(control_.renew(e.purpose, e.text, e.scripts)); break;
        }
    }

    // Roaming: rtnetlink changes, coalesced and rate-limited by the PathRule, checked on
    // this thread (the datapath threads never see them).
    void step_path(bool readable) {
        if (!watch_) return;
        const Clock::time_point now = Clock::now();
        if (readable && watch_->drain() > 0) {
            path_.event(now);
            trusted_due_ = !o_.trusted_while_up.servers.empty();
        }
        // Every turn, not only when the fd is readable: sd-bus may hold read messages in its queue.
        if (sleep_ && sleep_->watching()) {
            if (sleep_->drain() > 0) {
                LOG_INFO << "resumed from sleep (logind's PrepareForSleep): checking the path to the server";
                path_.resumed(now, true);
            }
            if (!sleep_->watching())
                LOG_WARN << "roaming: the system bus went away; a resume is now noticed by the clock jump only";
        }
        const std::string peer = d_.path_peer();
        if (peer.empty()) return;
        PathRule::State st;
        st.in_outage = control_.in_outage();
        st.can_probe = !st.in_outage && !control_.attempt_in_flight();
        st.last_rx = d_.last_receive();
        PathRule::Decision dec = path_.step(now, st, [&peer] { return io::local_address_for(peer); });
        if (dec.action == PathRule::Action::probe) {
            LOG_INFO << "path to " << peer << " changed (local address " << path_.local() << " kept): probing the link";
            if (!d_.probe_path()) LOG_DEBUG << "the link cannot be probed";
        } else if (dec.action == PathRule::Action::reconnect) {
            apply(control_.path_reconnect(now, dec.why));
        }
        publish_path_json();
    }
    static std::chrono::milliseconds boottime() {
        timespec ts{};
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return std::chrono::milliseconds(static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000);
    }
    // A resume without logind: the loop did not run for much longer than its poll asked
    // (CLOCK_BOOTTIME counts a suspend, which CLOCK_MONOTONIC does not; both count a SIGSTOP).
    void note_sleep(int asked_ms, std::chrono::milliseconds boot0, Clock::time_point mono0) {
        if (!watch_) return;
        const auto boot = boottime() - boot0;
        if (!slept(std::chrono::milliseconds(asked_ms), boot)) return;
        const auto mono = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - mono0);
        LOG_INFO << "resumed: the loop did not run for " << boot.count() << " ms ("
                 << (boot - mono > std::chrono::milliseconds(2000) ? "the machine slept" : "the process was stopped")
                 << "): checking the path to the server";
        path_.resumed(Clock::now(), false);
    }
    int poll_timeout() const {
        int t = d_.poll_ms();
        auto until = [&](Clock::time_point due) {
            const auto left = ms_of(due - Clock::now());
            t = static_cast<int>(std::clamp<long long>(left + 1, 0, t));
        };
        if (auto due = path_.next_due()) until(*due);
        if (domains_ && carried_) until(domains_->next_due());
        return t;
    }
    // The domain-based split tunnel (domain_split.h), when the gateway sent domain lists.
    void start_domains(const TunnelConfig& config) {
        DomainSplitOptions opt;
        opt.disable_ipv6 = o_.host.disable_ipv6;
        opt.keeps_privileges = o_.keeps_privileges;
        // A test knob (the namespace test re-resolves within seconds): the shortest TTL kept.
        if (const char* v = std::getenv("ESPVPN_DOMAIN_MIN_TTL"); v && *v) {
            const long s = std::strtol(v, nullptr, 10);
            if (s >= 1 && s <= 3600) opt.limits.min_ttl = std::chrono::seconds(s);
        }
        domain_options_ = opt;
        replace_domains(config);
    }
    // A reconnect's configuration: the same domain lists and DNS servers keep the routes;
    // other ones replace them (the old routes go first).
    void refresh_domains(const TunnelConfig& fresh) {
        const TunnelConfig& was = domains_config_;
        if (fresh.split_include_domains == was.split_include_domains &&
            fresh.split_exclude_domains == was.split_exclude_domains && fresh.dns == was.dns)
            return;
        LOG_INFO << "the gateway's split domains or DNS servers changed: their routes are made again";
        if (domains_) domains_->stop();
        ++domain_options_.generation;
        replace_domains(fresh);
    }
    void replace_domains(const TunnelConfig& config) {
        domains_config_ = config;
        auto next = DomainSplit::start(config, host_, domain_options_, Clock::now());
        std::unique_ptr<DomainSplit> old;  // ends after the lock is released
        std::lock_guard lock(json_mu_);
        old = std::exchange(domains_, std::move(next));
    }
    // {"rules": ...} or "" without domain lists (any thread).
    std::string domains_json() const {
        std::lock_guard lock(json_mu_);
        return domains_ ? domains_->json() : std::string();
    }
    // What roaming did, for --stats-json.
    std::string path_json() const {
        std::lock_guard lock(json_mu_);
        return path_json_;
    }
    void publish_path_json() {
        const PathCounters& c = path_.counters();
        std::lock_guard lock(json_mu_);
        path_json_ = "{\"watching\": " + std::string(watch_ ? "true" : "false") + ", \"events\": " + std::to_string(c.events) +
               ", \"checks\": " + std::to_string(c.checks) + ", \"probes\": " + std::to_string(c.probes) +
               ", \"probe_failures\": " + std::to_string(c.probe_failures) +
               ", \"reconnects\": " + std::to_string(c.reconnects) + ", \"deferred\": " + std::to_string(c.deferred) +
               ", \"resumes\": " + std::to_string(c.resumes) + ", \"sleep_signals\": " + std::to_string(c.sleep_signals) +
               ", \"logind\": " + std::string(sleep_ && sleep_->watching() ? "true" : "false") + "}";
    }
    void watch_path() {
        // For measuring the outage without roaming (docs/RELIABILITY.md), as before it existed.
        if (const char* off = std::getenv("ESPVPN_NO_ROAMING"); off && *off && std::string(off) != "0") {
            LOG_INFO << "roaming off (ESPVPN_NO_ROAMING): path changes are noticed by DPD only";
            publish_path_json();
            return;
        }
        // Not the tun's changes, nor the captive-portal probe's table (rewritten by each probe).
        auto w = io::RouteWatch::open(host_.tun().ifindex(), host::kProbeTable);
        if (!w) {
            LOG_WARN << "roaming: " << w.error().message << "; path changes are noticed by DPD only";
            return;
        }
        watch_.emplace(std::move(*w));
        if (auto s = io::SleepWatch::open()) {
            sleep_.emplace(std::move(*s));
        } else {
            LOG_DEBUG << "roaming: no logind PrepareForSleep (" << s.error().message
                      << "); a resume is noticed by the clock jump";
        }
        path_.set_local(io::local_address_for(d_.path_peer()));
        publish_path_json();
    }

    // The status socket's state: reconnecting during an outage, connected once a link carried.
    void publish_state() {
        if (!o_.status_board) return;
        o_.status_board->set_state(control_.in_outage() ? status::State::reconnecting
                                   : carried_           ? status::State::connected
                                                        : status::State::connecting);
    }
    // disconnect: logs out as SIGTERM does; reconnect: as SIGUSR2 (a new link with the same
    // session, or the outage's next attempt now).
    void serve_commands() {
        for (status::Request r : o_.status_server->take_commands()) {
            if (end_) return;
            if (r == status::Request::disconnect) {
                LOG_INFO << "disconnect requested on the status socket: logging out";
                apply(control_.link_ended(TunnelEnd::user_logout, "disconnected on request"));
            } else if (r == status::Request::reconnect) {
                LOG_INFO << "reconnect requested on the status socket";
                apply(control_.signal(SIGUSR2, Clock::now(), d_.renew_blocked()));
            }
        }
    }

    // `first`: the first link's `up`, when start() had it at once.
    TunnelEnd run(SignalWatch& signals, const std::optional<LinkEvent>& first) {
        if (first) apply(*first);
        publish_state();
        while (!end_) {
            // A new link is made on its own thread: signals are served meanwhile, and its end wakes us.
            pollfd p[7 + DomainSplit::kMaxFds] = {
                {signals.fd(), POLLIN, 0},
                {attempt_ ? attempt_->done_fd() : -1, POLLIN, 0},
                {watch_ ? watch_->fd() : -1, POLLIN, 0},
                {sleep_ ? sleep_->fd() : -1, sleep_ ? sleep_->events() : short(0), 0},
                {o_.status_server ? o_.status_server->commands_fd() : -1, POLLIN, 0},
                {probe_ ? probe_->done_fd() : -1, POLLIN, 0},
                {trusted_ ? trusted_->done_fd() : -1, POLLIN, 0}};
            nfds_t n = 7;
            if (domains_ && carried_)  // stepped only then: a query waiting before would spin the loop
                for (int fd : domains_->fds()) p[n++] = {fd, POLLIN, 0};  // at most kMaxFds
            const int timeout = poll_timeout();
            const auto boot0 = boottime();
            const Clock::time_point mono0 = Clock::now();
            poll(p, n, timeout);
            note_sleep(timeout, boot0, mono0);
            for (int sig; !end_ && (sig = signals.next()) != 0;)
                apply(control_.signal(sig, Clock::now(), d_.renew_blocked()));
            if (!end_ && (p[4].revents & POLLIN)) serve_commands();
            if (!end_) step_path((p[2].revents & POLLIN) != 0);
            // Resolved once the tunnel carries traffic (the queries take it).
            if (!end_ && domains_ && carried_) domains_->step(Clock::now());
            if (!end_ && attempt_ && attempt_->done()) {
                attempt_->wait();
                AttemptResult r = d_.finish_attempt(control_.attempt_purpose(), control_.in_outage(), control_.attempt_why());
                attempt_.reset();
                if (o_.status_board && r.kind != AttemptResult::Kind::opened && !r.why.empty())
                    o_.status_board->set_error(r.why);
                apply(control_.attempt_finished(Clock::now(), r));
                if (auto fresh = d_.take_new_config(); fresh && !end_) refresh_domains(*fresh);
                if (!end_ && r.kind == AttemptResult::Kind::failed && control_.in_outage()) start_probe();
            }
            if (!end_ && probe_ && probe_->done()) finish_probe();
            if (!end_ && trusted_ && trusted_->done()) finish_trusted_check();
            if (!end_ && trusted_due_ && !trusted_) start_trusted_check();
            if (!end_) apply(control_.tick(Clock::now()));
            if (end_) break;
            for (const LinkEvent& e : d_.step(Clock::now(), control_)) {
                apply(e);
                if (end_) break;
            }
            publish_state();
        }
        if (attempt_) {
            // Cancelled, not awaited: its waits end at once, whatever the server does.
            const Clock::time_point t0 = Clock::now();
            attempt_.reset();
            LOG_INFO << "the connection attempt in progress (" << control_.attempt_why() << ") cancelled in "
                     << ms_of(Clock::now() - t0) << " ms";
        }
        probe_.reset();  // cancelled: its waits end at once
        trusted_.reset();  // not awaited: it ends by itself within its bound
        if (domains_) domains_->stop();  // its routes go before the links stop
        return *end_;
    }

    // An IPv4 and an IPv6 socket from the host that take the way around the tunnel (and past
    // the kill switch) into `route`'s v4 / v6; a family the host refuses is left out (logged).
    template <class Route>
    void open_probe_sockets(Route& route, const char* what) {
        for (int family : {AF_INET, AF_INET6}) {
            auto fd = host_.open_probe_socket(family);
            if (!fd) {
                LOG_DEBUG << what << ": " << fd.error().message;
                continue;
            }
            (family == AF_INET ? route.v4 : route.v6) = std::move(*fd);
        }
    }

    // Captive portals: a reconnect attempt failed; is a portal in the way? (one probe at a time)
    void start_probe() {
        if (!o_.captive_probe || probe_) return;
        // The host's marked sockets take the way around the tunnel and past the kill switch.
        io::ProbeRoute route;
        if (probe_addresses_) route.addresses = probe_addresses_->get();
        open_probe_sockets(route, "captive-portal probe");
        probe_ = std::make_unique<BackgroundProbe>(*o_.captive_probe, std::move(route));
    }
    void finish_probe() {
        const captive::Verdict v = probe_->verdict();
        probe_.reset();
        LOG_DEBUG << "captive-portal probe " << o_.captive_probe->url.text() << ": " << v.why;
        if (v.kind != captive::Verdict::Kind::portal || !control_.in_outage()) return;
        // Its routes and DNS would take the browser's traffic into the dead tunnel: the session
        // ends (its cookie kept), the tun goes, the kill switch stays (held by the host).
        const bool held = o_.host.kill_switch && host_.hold_kill_switch();
        if (o_.host.kill_switch && !held) {
            // No privilege split: the kill switch would go with the tunnel. Fail closed.
            if (!captive_said_)
                LOG_WARN << "captive portal (" << v.why << ") at " << v.portal_url
                         << ": the tunnel and --kill-switch stay (its rules are kept through a portal only when "
                            "espvpn was started as root)";
            captive_said_ = true;
            return;
        }
        if (o_.captive_portal) *o_.captive_portal = {v.portal_url, probe_addresses_ ? probe_addresses_->get() : std::vector<std::string>{}};
        if (o_.status_board) {
            o_.status_board->set_state(status::State::captive_portal, "captive portal (" + v.why + ")");
            o_.status_board->set_portal(v.portal_url);
        }
        apply(control_.link_ended(TunnelEnd::captive_portal,
                                  "captive portal (" + v.why + ") at " + v.portal_url + ": the tunnel goes down" +
                                      (held ? " (the kill switch stays)" : "") + " until the portal lets traffic through"));
    }

    // Trusted networks while connected: the host's network changed; are we in the office now?
    // One check at a time; changes during one make another after it.
    void start_trusted_check() {
        trusted_due_ = false;
        const TrustedRules& rules = o_.trusted_while_up;
        std::vector<io::TlsProbeRoute> routes;
        bool any = false;
        for (std::size_t i = 0; i < rules.servers.size(); ++i) {
            io::TlsProbeRoute r;
            r.avoid_device = host_.tun().name();
            open_probe_sockets(r, "trusted-network check");
            any = any || r.given();
            routes.push_back(std::move(r));
        }
        if (!any) {
            if (std::exchange(trusted_unasked_, true)) return;
            LOG_WARN << "trusted-network check: no socket around the tunnel could be made: --trusted-server is "
                        "checked again only after this session";
            return;
        }
        LOG_DEBUG << "the host's network changed: asking --trusted-server around the tunnel";
        trusted_ = std::make_unique<BackgroundTrustedCheck>(rules, std::move(routes));
    }
    void finish_trusted_check() {
        const TrustedVerdict v = trusted_->verdict();
        trusted_.reset();
        if (!v.trusted) {
            // Said again (-v) only when the verdict is the same: a network's router
            // advertisements change addresses every few minutes.
            const log::Level level = v.reason == trusted_said_ ? log::Level::debug : log::Level::info;
            if (log::enabled(level)) log::Line(level) << "the host's network changed: " << v.reason << ": staying connected";
            trusted_said_ = v.reason;
            return;
        }
        if (o_.trusted_found) *o_.trusted_found = v.reason;
        if (o_.status_board) o_.status_board->set_state(status::State::trusted_network);
        apply(control_.link_ended(TunnelEnd::user_logout,
                                  "the host's network changed: " + v.reason + " (asked around the tunnel): logging out "
                                  "(--always-on)"));
    }

    std::optional<TunnelEnd> end_;

private:
    SessionDriver& d_;
    const TunnelOptions& o_;
    host::Host& host_;
    SessionControl control_;
    std::unique_ptr<LinkAttempt> attempt_;
    std::unique_ptr<BackgroundProbe> probe_;  // a captive-portal probe (start_probe)
    bool captive_said_ = false;               // the portal that cannot be let through was logged
    std::unique_ptr<BackgroundTrustedCheck> trusted_;  // a trusted-network check (start_trusted_check)
    bool trusted_due_ = false;                         // the host's network changed since the last one
    bool trusted_unasked_ = false;                     // no socket around the tunnel (logged once)
    std::string trusted_said_;                         // the last verdict logged at info
    std::optional<ProbeAddresses> probe_addresses_;  // looked up when the session starts
    std::optional<io::RouteWatch> watch_;
    std::optional<io::SleepWatch> sleep_;  // logind's PrepareForSleep, when there is a bus
    PathRule path_;
    // Replaced under json_mu_ (the stats reporter's thread reads its json()).
    std::unique_ptr<DomainSplit> domains_;
    TunnelConfig domains_config_;  // what domains_ was made from
    DomainSplitOptions domain_options_;
    bool carried_ = false;                  // the first link has come up
    mutable std::mutex json_mu_;  // path_json_ and domains_, read by the stats reporter's thread
    std::string path_json_ = "{}";
};

}  // namespace

Result<TunnelEnd> run_tunnel_session(SessionDriver& d, const TunnelOptions& o) {
    // Signals are blocked before any thread starts, so every thread inherits the mask.
    SignalWatch signals;
    auto plan = d.prepare();
    if (!plan) return plan.error();
    if (const TunnelEnd* end = std::get_if<TunnelEnd>(&*plan)) return *end;
    const auto& hp = std::get<SessionDriver::HostPlan>(*plan);

    std::unique_ptr<host::Host> host_owner =
        o.make_host ? o.make_host(o.host) : std::make_unique<host::TunnelHost>(o.host);
    host::Host& host = *host_owner;
    // Whatever happens next, the driver's links stop before the host (and its tun) goes.
    struct StopLinks {
        SessionDriver& d;
        ~StopLinks() { d.stop(); }
    };
    if (Status s = host.bring_up(hp.config, hp.mtu); !s) return s.error();
    StopLinks stop_links{d};
    SessionLoop loop(d, o, host);
    // Subscribed before the first link starts: no change between them is missed.
    loop.watch_path();
    // Before after_setup: its sockets are bound to the tun, and --setuid comes there.
    if (!o.dry_run) loop.start_domains(hp.config);
    auto started = d.start(host);
    if (!started) return started.error();
    if (*started && (*started)->kind == LinkEvent::Kind::ended) return (*started)->end;
    if (o.after_setup) {
        if (Status s = o.after_setup(); !s) return s.error();
    }
    datapath::StatsReporterOptions report;
    report.json_path = o.stats_json;
    report.files = o.state_files;
    datapath::StatsView view = d.stats_view();
    // The driver's object, with the roaming counters as "path" (read on the reporter's thread:
    // small integers, a torn read shows an old count at worst).
    view.json = [inner = view.json, &loop] {
        std::string j = inner();
        const auto close = j.rfind('}');
        if (close == std::string::npos) return j;
        std::string extra = ", \"path\": " + loop.path_json();
        if (std::string dj = loop.domains_json(); !dj.empty()) extra += ", \"domain_routes\": " + dj;
        return j.insert(close, extra);
    };
    auto reporter = datapath::StatsReporter::start(view, report);
    if (!reporter) return reporter.error();

    // The status socket sees the tun and the transport while the loop runs.
    struct StatusLink {
        StatusBoard* board;
        ~StatusLink() {
            if (!board) return;
            board->set_link(0, {}, {});
            board->set_expires(0);
        }
    } status_link{o.status_board};
    if (o.status_board) {
        o.status_board->set_link(host.tun().ifindex(), host.tun().name(), [&d] { return d.transport_name(); });
        // Counted from now: the login was a moment ago.
        if (const int lifetime = d.session_lifetime_s(); lifetime > 0)
            o.status_board->set_expires(static_cast<std::int64_t>(::time(nullptr)) + lifetime);
    }
    const TunnelEnd end = loop.run(signals, *started);
    if (end == TunnelEnd::user_logout) d.logout();
    // The reporter's last write (--stats-json) while the links still hold their counters.
    reporter->reset();
    return end;
}

}  // namespace espvpn::session
