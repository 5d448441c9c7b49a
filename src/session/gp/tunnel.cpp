#include "src/session/gp/tunnel.h"

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "protocols/base/hex.h"
#include "crypto/esp_transform.h"
#include "crypto/key_history.h"
#include "protocols/esp/esp_sa.h"
#include "protocols/gp/https_tunnel.h"
#include "protocols/tunnel/dpd_timer.h"
#include "protocols/gp/tunnel_mtu.h"
#include "src/datapath/esp/esp_datapath.h"
#include "src/datapath/rx_linger.h"
#include "src/datapath/tls/tls_pump.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"
#include "src/session/gp/esp_prober.h"

namespace espvpn::session {

using Clock = std::chrono::steady_clock;

namespace {

// Writes the tunnel GET on `tls` and reads the 12-byte answer; Ok once it was
// START_TUNNEL. A refusal is an error naming the HTTP status; `cookie_rejected`
// is set for 502.
Status start_https_tunnel(io::TlsStream& tls, const gp::GpSessionCookie& cookie, const std::string& path,
                          bool& cookie_rejected) {
    const Secret request = gp::tunnel_connect_request(cookie, path.empty() ? "/ssl-tunnel-connect.sslvpn" : path);
    if (Status s = tls.write_all(request.reveal()); !s) return make_error("HTTPS tunnel request: " + s.error().message);
    std::uint8_t reply[gp::kTunnelReplySize];
    std::size_t have = 0;
    while (have < sizeof reply) {
        // Exactly 12 bytes: frames that follow stay buffered for the datapath.
        auto n = tls.read_some({reply + have, sizeof reply - have});
        if (!n) return make_error("HTTPS tunnel reply: " + n.error().message);
        if (*n == 0) break;
        have += *n;
    }
    gp::GpTunnelRefusal refusal;
    Status s = gp::check_tunnel_reply({reply, have}, &refusal);
    cookie_rejected = refusal.cookie_rejected();
    return s;
}

struct SaPair {
    EspOutboundSa outbound;
    EspInboundSa inbound;
};

// An SA whose encryption key this session has used before (in either direction), or
// one key for both directions, is refused: each new SA starts its GCM nonces (sequence
// numbers) again, so a repeated key repeats nonces. `used` keeps fingerprints, not keys.
Status check_fresh_keys(const gp::GpIpsecConfig& sa, crypto::KeyHistory& used) {
    const auto out = sa.c2s.enc_key.reveal(), in = sa.s2c.enc_key.reveal();
    const bool both_ways = sa.c2s.enc_key.equals(sa.s2c.enc_key);
    if (both_ways || used.seen(out) || used.seen(in))
        return make_error(std::string("the gateway sent an ESP encryption key ") +
                          (both_ways ? "for both directions" : "that this session has used before") +
                          ": refused (a repeated key repeats AES-GCM nonces; the gateway must send new keys)");
    used.remember(out);
    used.remember(in);
    return {};
}

// The SAs of a configuration, once its keys are known to be new (check_fresh_keys).
Result<SaPair> build_sas(const gp::GpIpsecConfig& sa, crypto::KeyHistory& used) {
    if (Status s = check_fresh_keys(sa, used); !s) return s.error();
    auto suite = esp_suite_from_names(sa.enc_algo, sa.hmac_algo);
    if (!suite) return suite.error();
    auto out_keys = EspSaKeys::create(*suite, sa.c2s.enc_key.clone(), sa.c2s.auth_key.clone());
    if (!out_keys) return make_error("outbound SA: " + out_keys.error().message);
    auto in_keys = EspSaKeys::create(*suite, sa.s2c.enc_key.clone(), sa.s2c.auth_key.clone());
    if (!in_keys) return make_error("inbound SA: " + in_keys.error().message);
    auto out = EspOutboundSa::create(sa.c2s.spi, *out_keys);
    if (!out) return make_error("outbound SA: " + out.error().message);
    auto in = EspInboundSa::create(sa.s2c.spi, *in_keys);
    if (!in) return make_error("inbound SA: " + in.error().message);
    return SaPair{std::move(*out), std::move(*in)};
}

// The SAs of a fetched configuration; `no_keys` is the error when it has none.
Result<SaPair> fresh_sas(const GpTunnelSetup& fresh, const char* no_keys, crypto::KeyHistory& used) {
    if (!fresh.esp) return make_error(no_keys);
    return build_sas(fresh.esp->sa, used);
}

using datapath::Transport;

// The "reconnected" line's end for a link that replaced a lost one.
constexpr const char* kSinceLost = " since the transport was declared lost";

std::string seconds_since(Clock::time_point from, Clock::time_point to) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(to - from).count());
}

// GP's timings: openconnect's 10 s DPD (20 s of silence: dead), or --force-dpd; while the
// peer is quiet, a probe / keepalive every dpd/2 (openconnect: 5 s of its 10 s), at least 1 s apart.
struct GpTimers {
    // No probe reply by then: fall back to HTTPS (openconnect waits 5 s, the Windows client 10 s; docs/protocols/globalprotect.md §10.5).
    std::chrono::seconds probe_timeout{5};
    DpdSettings dpd{std::chrono::seconds(10), std::chrono::seconds(0), std::chrono::seconds(1)};
    explicit GpTimers(int force_dpd_s) {
        if (force_dpd_s > 0) dpd.dpd = std::chrono::seconds(force_dpd_s);
    }
};

// The GlobalProtect driver of the session core: ESP or the HTTPS tunnel over the
// session's tun, getconfig rekeys, ESP retries from the HTTPS tunnel.
class GpDriver final : public SessionDriver {
public:
    GpDriver(const GpTunnelSetup& setup, const TunnelOptions& options, GpGatewaySession& gateway, Status& logout,
             const HipRenewalPlan* hip)
        : setup_(setup), o_(options), gateway_(gateway), logout_(logout), timers_(options.force_dpd_s), hip_plan_(hip) {}

    Result<Prepared> prepare() override;
    Result<std::optional<LinkEvent>> start(host::Host& host) override;
    std::string peer() const override { return "the gateway"; }
    std::string attempt_text() const override { return "new configuration with the same cookie"; }
    datapath::StatsView stats_view() override {
        return {[this] { return stats().to_json(); }, [this] { return stats().to_text(); }};
    }
    int session_lifetime_s() const override { return static_cast<int>(setup_.cookie_lifetime_s); }
    std::string transport_name() const override {
        std::lock_guard lock(mu_);
        switch (transport()) {
            case Transport::esp: return "ESP";
            case Transport::https: return "HTTPS";
            case Transport::none: break;
        }
        return {};
    }
    std::vector<LinkEvent> step(Clock::time_point now, const SessionControl& control) override {
        if (hip_ && hip_->cookie_rejected()) {
            LOG_ERROR << hip_->rejection();
            hip_.reset();
            return {LinkEvent::ended(TunnelEnd::cookie_rejected, "the gateway refused the session cookie (HIP check)")};
        }
        const bool attempting = control.attempt_in_flight();
        if (esp_) return step_esp(now, attempting);
        if (https_) return step_https(now, attempting);
        return {};  // no link: the core makes the attempts
    }
    std::unique_ptr<LinkAttempt> begin_attempt(AttemptPurpose purpose) override;
    AttemptResult finish_attempt(AttemptPurpose purpose, bool in_outage, const std::string&) override {
        AttemptResult r = adopt_attempt(purpose, in_outage);
        // Every new getconfig (reconnect, rekey, ESP retry) is followed by the HIP check, as
        // openconnect's does after each of its getconfigs.
        if (hip_ && fetched_ && *fetched_ && r.kind != AttemptResult::Kind::cookie_rejected)
            hip_->renew_now(purpose == AttemptPurpose::reconnect ? "after the reconnect" : "after the new configuration",
                            (*fetched_)->config.ip4_address, (*fetched_)->config.ip6_address);
        return r;
    }
    void drop_link() override {
        prober_.reset();
        stop_esp();
        stop_https();
    }
    void stop() override {
        hip_.reset();  // a check in flight is cancelled, not awaited
        drop_link();
        udp_.reset();
    }
    std::string path_peer() const override { return esp_peer_.empty() ? setup_.config.gateway_address : esp_peer_; }
    bool probe_path() override {
        if (esp_ && connected_ && esp_options_.probe.enabled()) {
            esp_->send_probe();
            return true;
        }
        if (https_) {
            https_->request_keepalive();  // the gateway echoes it
            return true;
        }
        return false;
    }
    Clock::time_point last_receive() const override {
        return esp_ ? esp_->liveness().last_rx : https_ ? https_->last_rx() : Clock::time_point{};
    }
    // Not during an outage: a blackholed gateway would hold the exit for its timeout.
    void logout() override {
        hip_.reset();  // no check after (or racing) the logout
        if (transport() != Transport::none) logout_ = gateway_.logout();
        else LOG_WARN << "no connection to the gateway: logout not sent (the gateway ends the session after its "
                         "cookie timeout)";
    }
    std::optional<TunnelConfig> take_new_config() override { return std::exchange(new_config_, std::nullopt); }

private:
    // openconnect's schedule: a minute before the keys expire (half-way for short lifetimes).
    Clock::time_point next_rekey(Clock::time_point from) const {
        if (rekey_after_s_ == 0) return Clock::time_point::max();
        return from + std::chrono::seconds(rekey_after_s_ > 120 ? rekey_after_s_ - 60 : rekey_after_s_ / 2);
    }
    // The probe target and key lifetime of a (re)fetched configuration.
    Status take_esp_setup(const GpEspSetup& esp) {
        esp_options_.probe = {};
        if (!esp.probe_ipv4.empty() && !esp.tunnel_ipv4.empty()) {
            auto target = datapath::ProbeTarget::parse(esp.tunnel_ipv4, esp.probe_ipv4);
            if (!target) return make_error("ESP probe: " + target.error().message);
            esp_options_.probe = *target;
        }
        rekey_after_s_ = esp.rekey_after_s;
        return {};
    }
    // A new UDP socket to the configuration's ESP peer (the old one closed first:
    // a connected socket keeps a source address that may be gone).
    Status open_esp_socket(const GpEspSetup& esp) {
        io::UdpOptions u;
        u.remote = io::endpoint_text(esp.peer_address, esp.udp_port);
        if (o_.udp_local_port > 0) u.local = io::any_endpoint_like(esp.peer_address, o_.udp_local_port);
        u.make_socket = o_.udp_socket;
        udp_.reset();
        auto udp = io::UdpSocket::open(u);
        if (!udp) return make_error("ESP socket to " + u.remote + ": " + udp.error().message);
        udp_.emplace(std::move(*udp));
        esp_peer_ = esp.peer_address;
        return {};
    }

    Status start_esp(datapath::EspInitialSas sas, bool probe_answered) {
        const Clock::time_point now = Clock::now();
        esp_options_.rx_linger = datapath::client_rx_linger();
        auto dp = datapath::EspDatapath::start(*tun_, *udp_, esp_options_, std::move(sas));
        if (!dp) return dp.error();
        std::lock_guard lock(mu_);
        esp_ = std::move(*dp);
        connected_ = probe_answered || !esp_options_.probe.enabled();
        probing_since_ = now;
        dpd_ = DpdTimer(timers_.dpd, now);
        last_probe_ = {};
        return {};
    }
    // ESP with a configuration's keys on a new socket (probing unless there is no probe address).
    Status start_esp_on(const GpEspSetup& esp, bool reconnect);
    void stop_esp() {
        if (!esp_) return;
        esp_->stop();
        LOG_INFO << "ESP statistics:\n" << esp_->stats().to_text();
        std::lock_guard lock(mu_);
        esp_.reset();
    }
    // The HTTPS tunnel on a connection that took the tunnel GET.
    Status start_https(std::unique_ptr<io::TlsStream> tls);
    void stop_https() {
        if (!https_) return;
        https_->stop();
        datapath::DatapathStats s;
        s.transport = Transport::https;
        s.https = https_->stats();
        LOG_INFO << "HTTPS tunnel statistics:\n" << s.to_text();
        std::lock_guard lock(mu_);
        https_.reset();
        https_tls_->close();
        https_tls_.reset();
    }
    // On the attempt thread: a connection to the gateway that took the tunnel GET.
    Result<std::unique_ptr<io::TlsStream>> connect_https(bool& cookie_rejected) const;
    // ESP stops; the HTTPS tunnel is connected on the attempt thread.
    LinkEvent switch_to_https(const std::string& reason) {
        LOG_INFO << "switching to the HTTPS tunnel: " << reason;
        stop_esp();
        prober_.reset();
        https_failures_ = 0;
        fallback_reason_ = reason;
        return LinkEvent::renew(AttemptPurpose::fallback, "HTTPS tunnel", false);
    }
    LinkEvent switch_to_esp(const std::string& reason) {
        LOG_INFO << "switching back to ESP: " << reason << "; closing the HTTPS tunnel";
        stop_https();
        datapath::EspInitialSas sas = prober_->release_sas();
        prober_.reset();
        if (Status s = start_esp(std::move(sas), true); !s) return LinkEvent::ended(TunnelEnd::error, s.error().message);
        ++switches_;
        LOG_INFO << "ESP connected again; " << tun_->name() << " carries its traffic over ESP";
        return LinkEvent::up("over ESP", kSinceLost);
    }

    std::vector<LinkEvent> step_esp(Clock::time_point now, bool attempting);
    std::vector<LinkEvent> step_https(Clock::time_point now, bool attempting);
    // New keys for the running ESP datapath, from a fetched configuration.
    AttemptResult rekey_esp(const GpTunnelSetup& fresh);
    // A prober on new keys while the HTTPS tunnel carries the traffic.
    AttemptResult begin_esp_retry(const GpTunnelSetup& fresh, Clock::time_point now);
    AttemptResult reconnect(Result<GpTunnelSetup> fresh);
    // The attempt's result taken into the links.
    AttemptResult adopt_attempt(AttemptPurpose purpose, bool in_outage);
    // Kept-alive TLS connections to the gateway may be stale after a loss (from a source
    // address that is gone: a request on one would hang until its timeout).
    void forget_connections() { gateway_.https().close_all(); }
    datapath::DatapathStats stats() const {
        std::lock_guard lock(mu_);
        datapath::DatapathStats s;
        if (esp_) s = esp_->stats();
        if (https_) s.https = https_->stats();
        s.transport = transport();
        s.transport_switches = switches_;
        return s;
    }
    // What carries the traffic: at most one datapath runs (the prober is not one).
    Transport transport() const { return esp_ ? Transport::esp : https_ ? Transport::https : Transport::none; }

    const GpTunnelSetup& setup_;
    const TunnelOptions& o_;
    GpGatewaySession& gateway_;
    Status& logout_;
    const GpTimers timers_;
    io::TunDevice* tun_ = nullptr;  // the host's device, once up
    std::optional<io::UdpSocket> udp_;
    std::string esp_peer_;  // where the ESP socket goes (the path roaming watches)
    const GpEspSetup* first_esp_ = nullptr;
    std::optional<EspSuite> suite_;
    unsigned rekey_after_s_ = 0;  // the current keys' lifetime (getconfig <timeout>)
    int mtu_ = 0;
    datapath::EspDatapathOptions esp_options_;
    bool esp_possible_ = false;   // ESP allowed, keys offered, a socket open
    crypto::KeyHistory used_keys_;  // every SA's encryption keys so far (check_fresh_keys)

    mutable std::mutex mu_;       // the datapath pointers, against the stats reporter thread
    std::uint64_t switches_ = 0;
    std::unique_ptr<datapath::EspDatapath> esp_;
    std::unique_ptr<io::TlsStream> https_tls_;   // the HTTPS tunnel's connection, under https_
    std::unique_ptr<datapath::TlsPump> https_;

    // ESP state.
    bool connected_ = false;
    Clock::time_point probing_since_, last_probe_;
    // HTTPS state.
    Clock::time_point https_since_, next_esp_retry_ = Clock::time_point::max();
    DpdTimer dpd_{{}, {}};  // the transport's: restarted when ESP is connected or the HTTPS tunnel starts
    unsigned https_failures_ = 0;  // connections lost in a row before anything arrived
    std::unique_ptr<EspProber> prober_;
    Clock::time_point prober_since_;
    Clock::time_point rekey_at_ = Clock::time_point::max();

    // The attempt: what it does, and what its thread left (read after it is done).
    enum class Work { config, config_or_https, https };
    std::optional<Result<GpTunnelSetup>> fetched_;
    std::optional<TunnelConfig> new_config_;  // the last fetched configuration, for take_new_config
    std::optional<Result<std::unique_ptr<io::TlsStream>>> stream_;
    bool attempt_cookie_rejected_ = false;
    std::string fallback_reason_;  // the HTTPS tunnel is being connected because of this

    const HipRenewalPlan* hip_plan_;  // null: no periodic HIP
    std::unique_ptr<HipRenewal> hip_;
};

Result<std::unique_ptr<io::TlsStream>> GpDriver::connect_https(bool& cookie_rejected) const {
    // The login's kept-alive connection to the gateway if there is one (as openconnect does).
    const http::Url& gw = gateway_.gateway();
    for (int tries = 1;; ++tries) {
        auto tls = gateway_.https().release_connection(gw.host, gw.port);
        if (!tls) return make_error("HTTPS tunnel: " + tls.error().message);
        Status started = start_https_tunnel(**tls, gateway_.cookie(), setup_.https_tunnel_path, cookie_rejected);
        if (started) {
            (*tls)->set_cancel_fd(-1);  // the attempt's fd dies with it; the stream outlives it
            return std::move(*tls);
        }
        if (cookie_rejected || tries == 2) return started.error();
        // The kept-alive login connection may have been closed by the server meanwhile: once more on a new one.
        LOG_DEBUG << started.error().message << "; retrying on a new connection";
    }
}

Status GpDriver::start_https(std::unique_ptr<io::TlsStream> tls) {
    const std::string endpoint = tls->endpoint() + ", " + tls->description();
    const auto mtu = static_cast<std::size_t>(mtu_);
    auto pump = std::make_unique<datapath::TlsPump>(tls->native(), tls->fd(), *tun_, datapath::gp_framing(mtu),
                                                    datapath::client_pump_options(datapath::gp_pump_options(mtu)));
    if (Status st = pump->start(); !st) return st;
    const Clock::time_point now = Clock::now();
    {
        std::lock_guard lock(mu_);
        https_tls_ = std::move(tls);
        https_ = std::move(pump);
    }
    https_since_ = now;
    dpd_ = DpdTimer(timers_.dpd, now);
    next_esp_retry_ = esp_possible_ && esp_options_.probe.enabled() && o_.udp_retry.count() > 0
                          ? now + o_.udp_retry
                          : Clock::time_point::max();
    LOG_INFO << "HTTPS tunnel up to " << endpoint << ", MTU " << mtu_;
    return {};
}

std::vector<LinkEvent> GpDriver::step_esp(Clock::time_point now, bool attempting) {
    datapath::EspLiveness live = esp_->liveness();
    if (auto f = esp_->failure()) return {LinkEvent::ended(TunnelEnd::error, "datapath stopped: " + *f)};
    if (!connected_) {
        if (live.last_probe_reply > probing_since_) {
            connected_ = true;
            dpd_ = DpdTimer(timers_.dpd, now);
            LOG_INFO << "ESP connected: probe answered after " << ms_of(now - probing_since_) << " ms; "
                     << tun_->name() << " is up";
            return {LinkEvent::up("over ESP", kSinceLost)};
        } else if (now - probing_since_ > timers_.probe_timeout) {
            if (attempting) return {};  // its end first (it may bring new keys)
            return {switch_to_https("no answer to the ESP probe within " + std::to_string(timers_.probe_timeout.count()) +
                                    " s (UDP blocked?)")};
        } else if (now - last_probe_ >= std::chrono::seconds(1)) {
            esp_->send_probe();
            last_probe_ = now;
        }
    } else if (esp_options_.probe.enabled()) {
        dpd_.on_receive(live.last_rx);
        const DpdAction due = dpd_.poll(now);
        if (due == DpdAction::peer_dead) {
            if (attempting) return {};  // the attempt uses the gateway connections: its end first
            forget_connections();
            return {switch_to_https("ESP dead: nothing received for " + seconds_since(dpd_.last_receive(), now) +
                                    " s")};
        }
        if (due == DpdAction::send_dpd_request) esp_->send_probe();
    }
    if (!attempting && now >= rekey_at_) {
        rekey_at_ = next_rekey(now);
        return {LinkEvent::renew(AttemptPurpose::rekey, "rekey", false)};
    }
    return {};
}

// A fresh getconfig (the HTTPS tunnel voided the old ESP keys), then a few
// probes on the new SAs; the HTTPS tunnel carries the traffic meanwhile.
AttemptResult GpDriver::begin_esp_retry(const GpTunnelSetup& fresh, Clock::time_point now) {
    auto sas = fresh_sas(fresh, "the gateway offers no ESP keys now; staying on the HTTPS tunnel", used_keys_);
    if (!sas) return AttemptResult::failed(sas.error().message);
    if (Status s = take_esp_setup(*fresh.esp); !s || !esp_options_.probe.enabled())
        return AttemptResult::failed("no usable probe address");
    if (Status s = open_esp_socket(*fresh.esp); !s) return AttemptResult::failed(s.error().message);
    LOG_INFO << "ESP retry: probing with new keys (in=" << hex32(sas->inbound.spi())
             << " out=" << hex32(sas->outbound.spi()) << ") while the HTTPS tunnel carries the traffic";
    prober_ = std::make_unique<EspProber>(*udp_, std::move(sas->outbound), std::move(sas->inbound), esp_options_.probe);
    prober_since_ = now;
    prober_->send_probe();
    last_probe_ = now;
    return AttemptResult::opened();
}

std::vector<LinkEvent> GpDriver::step_https(Clock::time_point now, bool attempting) {
    const Clock::time_point last_rx = https_->last_rx();
    if (last_rx > https_since_) https_failures_ = 0;
    std::string lost;
    if (auto end = https_->ended()) {
        lost = end->second;
    } else {
        dpd_.on_receive(last_rx);
        const DpdAction due = dpd_.poll(now);
        if (due == DpdAction::peer_dead) lost = "nothing received for " + seconds_since(dpd_.last_receive(), now) + " s";
        if (due == DpdAction::send_dpd_request) https_->request_keepalive();  // the gateway echoes it
    }
    if (!lost.empty()) {
        if (attempting) return {};  // the attempt uses the gateway connections: its end first
        prober_.reset();
        if (++https_failures_ > 3)
            return {LinkEvent::lost("HTTPS tunnel lost " + std::to_string(https_failures_ - 1) + " times in a row; last: " + lost)};
        LOG_WARN << "HTTPS tunnel lost (" << lost << "); reconnecting";
        stop_https();
        forget_connections();
        fallback_reason_ = "HTTPS tunnel lost (" + lost + ")";
        return {LinkEvent::renew(AttemptPurpose::fallback, "HTTPS tunnel", false)};
    }
    if (prober_) {
        if (prober_->take_replies())
            return {switch_to_esp("probe answered after " + std::to_string(ms_of(now - prober_since_)) + " ms")};
        if (now - prober_since_ > timers_.probe_timeout) {
            LOG_INFO << "ESP retry: " << prober_->probes_sent() << " probes unanswered; staying on the HTTPS tunnel, "
                     << "next try in " << o_.udp_retry.count() << " s";
            prober_.reset();
        } else if (now - last_probe_ >= std::chrono::seconds(1)) {
            prober_->send_probe();
            last_probe_ = now;
        }
        return {};
    }
    if (attempting) return {};
    // Its getconfig renews the keys (the rekey time); ESP again if it answers.
    if (now >= next_esp_retry_ || (now >= rekey_at_ && esp_possible_)) {
        next_esp_retry_ = now + o_.udp_retry;
        rekey_at_ = next_rekey(now);
        return {LinkEvent::renew(AttemptPurpose::rekey, "ESP retry", false)};
    }
    return {};
}

std::unique_ptr<LinkAttempt> GpDriver::begin_attempt(AttemptPurpose purpose) {
    fetched_.reset();
    stream_.reset();
    attempt_cookie_rejected_ = false;
    Work work = Work::config;
    switch (purpose) {
        case AttemptPurpose::reconnect:
            forget_connections();
            work = Work::config_or_https;
            break;
        case AttemptPurpose::fallback: work = Work::https; break;
        case AttemptPurpose::renew:
        case AttemptPurpose::rekey:
            if (esp_ && purpose == AttemptPurpose::rekey) LOG_INFO << "rekey: fetching new ESP keys";
            break;
    }
    return std::make_unique<LinkAttempt>([this, work](int cancel_fd) {
        // Every wait of the getconfig and the TLS connection ends at once when the attempt is cancelled.
        gateway_.https().set_cancel_fd(cancel_fd);
        if (work != Work::https) {
            fetched_.emplace(gateway_.fetch_config());
            if (!*fetched_ && gateway_.cookie_rejected()) attempt_cookie_rejected_ = true;
        }
        // A reconnect without ESP (--no-dtls, or no keys offered) goes on to the HTTPS tunnel.
        const bool need_https = work == Work::https || (work == Work::config_or_https && *fetched_ &&
                                                        (o_.no_dtls || !(*fetched_)->esp));
        if (need_https && !attempt_cookie_rejected_ && (!fetched_ || *fetched_)) {
            bool rejected = false;
            stream_.emplace(connect_https(rejected));
            if (rejected) attempt_cookie_rejected_ = true;
        }
        gateway_.https().set_cancel_fd(-1);
    });
}

Status GpDriver::start_esp_on(const GpEspSetup& esp, bool reconnect) {
    auto sas = build_sas(esp.sa, used_keys_);
    if (!sas) return sas.error();
    if (Status s = take_esp_setup(esp); !s) return s;
    if (Status s = open_esp_socket(esp); !s) return s;
    esp_possible_ = true;
    LOG_INFO << (reconnect ? std::string("reconnect: ESP") : "ESP " + std::string(suite_->name())) << " to "
             << io::endpoint_text(esp.peer_address, esp.udp_port) << ", in=" << hex32(sas->inbound.spi())
             << " out=" << hex32(sas->outbound.spi()) << (reconnect ? "; probing" : ", MTU " + std::to_string(mtu_));
    if (Status s = start_esp({std::move(sas->outbound), std::move(sas->inbound)}, false); !s) return s;
    rekey_at_ = next_rekey(Clock::now());
    return {};
}

// A getconfig with the session cookie (no login), then ESP with its new keys on a
// new socket (the probe decides: step_esp falls back to HTTPS), or HTTPS directly.
AttemptResult GpDriver::reconnect(Result<GpTunnelSetup> fresh) {
    if (!fresh) return AttemptResult::failed("getconfig: " + fresh.error().message);
    if (o_.no_dtls || !fresh->esp) {
        esp_possible_ = false;
        return AttemptResult::failed("HTTPS tunnel: not connected");
    }
    if (Status s = start_esp_on(*fresh->esp, true); !s) return AttemptResult::failed(s.error().message);
    return AttemptResult::opened("over ESP", kSinceLost, connected_);  // no probe address: assumed up
}

AttemptResult GpDriver::adopt_attempt(AttemptPurpose purpose, bool in_outage) {
    if (fetched_ && *fetched_) new_config_ = (*fetched_)->config;
    if (attempt_cookie_rejected_) {
        return AttemptResult::of(AttemptResult::Kind::cookie_rejected,
                                 fetched_ && !*fetched_   ? (*fetched_).error().message
                                 : stream_ && !*stream_ ? (*stream_).error().message
                                                        : "the gateway refused the session cookie");
    }
    const Clock::time_point now = Clock::now();
    if (stream_) {
        // The HTTPS tunnel (a fallback, or a reconnect without ESP).
        auto& stream = *stream_;
        if (!stream)
            return AttemptResult::failed(
                (purpose == AttemptPurpose::fallback ? fallback_reason_ + "; " : std::string()) + stream.error().message);
        if (Status s = start_https(std::move(*stream)); !s) return AttemptResult::failed(s.error().message);
        if (purpose == AttemptPurpose::fallback) {
            ++switches_;
        } else {
            https_failures_ = 0;
            esp_possible_ = false;  // a reconnect that found no ESP keys (or --no-dtls)
        }
        return AttemptResult::opened("over the HTTPS tunnel", kSinceLost);
    }
    if (!fetched_) return AttemptResult::failed("no configuration");
    if (in_outage || transport() == Transport::none) return reconnect(std::move(*fetched_));
    Result<GpTunnelSetup>& fresh = *fetched_;
    if (https_) {
        if (!fresh) return AttemptResult::failed("new configuration refused: " + fresh.error().message);
        if (!esp_possible_ || prober_) return AttemptResult::opened();
        return begin_esp_retry(*fresh, now);
    }
    // On ESP: new keys beside the old ones (rekey, SIGUSR2).
    if (!fresh) {
        // The gateway may be restarting: the current keys stay in use; DPD notices if ESP dies.
        rekey_at_ = now + std::chrono::seconds(5);
        return AttemptResult::failed(fresh.error().message, "; trying again in 5 s");
    }
    AttemptResult r = rekey_esp(*fresh);
    if (r.kind == AttemptResult::Kind::opened && purpose == AttemptPurpose::renew && esp_options_.probe.enabled()) {
        // SIGUSR2: the probe again; `reconnect` runs when it is answered. Without a gw-address
        // there is nothing to probe: ESP stays up, as it was assumed at the start.
        connected_ = false;
        last_probe_ = {};
        probing_since_ = Clock::now();
        r.up = false;
    }
    return r;
}

AttemptResult GpDriver::rekey_esp(const GpTunnelSetup& fresh) {
    auto sas = fresh_sas(fresh, "the gateway's new configuration has no ESP keys", used_keys_);
    if (!sas) return AttemptResult::fatal("rekey: " + sas.error().message);
    std::uint32_t in_spi = sas->inbound.spi(), out_spi = sas->outbound.spi();
    // Inbound first: the new keys open packets before the peer could use them;
    // the old inbound SA stays beside it for the grace period.
    if (!esp_->install_inbound(std::move(sas->inbound)) || !esp_->install_outbound(std::move(sas->outbound)))
        return AttemptResult::fatal("rekey: the datapath did not take the new SAs");
    rekey_after_s_ = fresh.esp->rekey_after_s;
    rekey_at_ = next_rekey(Clock::now());
    LOG_INFO << "rekey done: in=" << hex32(in_spi) << " out=" << hex32(out_spi);
    return AttemptResult::opened();
}

Result<SessionDriver::Prepared> GpDriver::prepare() {
    first_esp_ = !o_.no_dtls && setup_.esp ? &*setup_.esp : nullptr;
    if (first_esp_) {
        auto s = esp_suite_from_names(first_esp_->sa.enc_algo, first_esp_->sa.hmac_algo);
        if (!s) return s.error();
        suite_ = *s;
        if (Status st = take_esp_setup(*first_esp_); !st) return st.error();
    }
    // The outer family is the gateway's also without ESP: an HTTPS-only tunnel over IPv6
    // was sized for IPv4 (20 bytes too large) when it was taken from the ESP peer.
    mtu_ = gp::gp_tun_mtu({o_.mtu, setup_.config.mtu, o_.base_mtu, setup_.config.gateway_address,
                       suite_ ? suite_->iv_size() : 0, suite_ ? suite_->icv_size() : 0, suite_.has_value()});
    return Prepared{HostPlan{setup_.config, mtu_}};
}

Result<std::optional<LinkEvent>> GpDriver::start(host::Host& host) {
    tun_ = &host.tun();
    if (hip_plan_ && !o_.dry_run)
        hip_ = std::make_unique<HipRenewal>(*hip_plan_, setup_.config.ip4_address, setup_.config.ip6_address);
    if (first_esp_) {
        esp_options_.max_inner_size = esp_options_.tun_mtu = static_cast<std::size_t>(mtu_);
        if (Status s = start_esp_on(*first_esp_, false); !s) return s.error();
        if (!connected_) return std::optional<LinkEvent>{};  // step_esp reports the probe's answer
        LOG_WARN << "no gw-address to probe: ESP assumed up";
        return std::optional<LinkEvent>{LinkEvent::up("over ESP")};
    }
    LOG_INFO << "using the HTTPS tunnel: " << (!o_.no_dtls ? "the gateway offers no ESP keys" : "--no-dtls (no ESP)");
    bool rejected = false;
    auto tls = connect_https(rejected);
    if (!tls) {
        if (!rejected) return tls.error();
        LOG_ERROR << tls.error().message;
        return std::optional<LinkEvent>{LinkEvent::ended(TunnelEnd::cookie_rejected, tls.error().message)};
    }
    if (Status s = start_https(std::move(*tls)); !s) return s.error();
    return std::optional<LinkEvent>{LinkEvent::up("over the HTTPS tunnel")};
}

}  // namespace

Result<TunnelEnd> run_gp_tunnel(const GpTunnelSetup& setup, const TunnelOptions& options, GpGatewaySession& gateway,
                                Status& logout, const HipRenewalPlan* hip) {
    GpDriver driver(setup, options, gateway, logout, hip);
    return run_tunnel_session(driver, options);
}

}  // namespace espvpn::session
