#include "src/session/gp_tunnel.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <optional>

#include "crypto/esp_transform.h"
#include "protocols/esp/esp_sa.h"
#include "protocols/gp/https_tunnel.h"
#include "src/datapath/esp/esp_datapath.h"
#include "src/datapath/tls/gp_https_tunnel.h"
#include "src/datapath/stats_reporter.h"
#include "src/hooks/script_runner.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"
#include "src/session/esp_prober.h"
#include "src/session/reconnect_policy.h"
#include "src/session/signal_watch.h"
#include "src/session/tunnel_host.h"

namespace espvpn::session {

using Clock = std::chrono::steady_clock;

int esp_tunnel_mtu(int base_mtu, bool outer_ipv6, std::size_t iv_size, std::size_t icv_size) {
    int m = base_mtu > 0 ? base_mtu : 1406;
    if (m < 1280) m = 1280;
    m -= 8 + (outer_ipv6 ? 40 : 20);                         // UDP + outer IP
    m -= static_cast<int>(kEspSpiSeqSize + icv_size + iv_size);  // ESP header, IV, ICV
    m &= ~15;                                                // whole cipher blocks
    return m - 2;                                            // pad length + next header
}

int https_tunnel_mtu(int base_mtu, bool outer_ipv6) {
    int m = base_mtu > 0 ? base_mtu : 1406;
    if (m < 1280) m = 1280;
    // Outer IP + TCP with timestamps, a TLS record (header + AEAD tag), the GP frame header.
    return m - (outer_ipv6 ? 40 : 20) - 32 - (5 + 16) - static_cast<int>(gp::kFrameHeaderSize);
}

int gp_tun_mtu(const GpMtuInputs& in) {
    if (in.option_mtu > 0) return in.option_mtu;
    if (in.gateway_mtu > 0) return in.gateway_mtu;
    const bool outer_v6 = in.gateway_address.find(':') != std::string::npos;
    return in.esp ? esp_tunnel_mtu(in.base_mtu, outer_v6, in.esp_iv_size, in.esp_icv_size)
                  : https_tunnel_mtu(in.base_mtu, outer_v6);
}

Status start_https_tunnel(io::TlsStream& tls, const gp::GpSessionCookie& cookie, const std::string& path,
                          bool* cookie_rejected) {
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
    if (cookie_rejected) *cookie_rejected = refusal.cookie_rejected();
    return s;
}

namespace {

struct SaPair {
    EspOutboundSa outbound;
    EspInboundSa inbound;
};

Result<SaPair> build_sas(const gp::GpIpsecConfig& sa) {
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

std::string hex32(std::uint32_t v) {
    char buf[16];
    snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

using datapath::Transport;

long long ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

class GpTunnel {
public:
    GpTunnel(const GpTunnelSetup& setup, const GpTunnelOptions& options, const GpGatewayLinks& links)
        : setup_(setup), o_(options), links_(links), outage_("the gateway", options.reconnect_timeout) {}
    Result<TunnelEnd> run();

private:
    void mark_connected();
    // openconnect's schedule: a minute before the keys expire (half-way for short lifetimes).
    Clock::time_point next_rekey(Clock::time_point from) const {
        if (rekey_after_s_ == 0) return Clock::time_point::max();
        return from + std::chrono::seconds(rekey_after_s_ > 120 ? rekey_after_s_ - 60 : rekey_after_s_ / 2);
    }
    Status take_esp_setup(const GpEspSetup& esp);
    // A new UDP socket to the configuration's ESP peer (the old one closed first:
    // a connected socket keeps a source address that may be gone).
    Status open_esp_socket(const GpEspSetup& esp);
    // While the peer is quiet, a probe / keepalive this often (openconnect: 5 s of its 10 s DPD).
    Clock::duration dpd_repeat() const {
        return std::max<Clock::duration>(std::chrono::seconds(1), o_.dpd_interval / 2);
    }

    // Transports. Each returns an error only when the tunnel must end.
    Status start_esp(datapath::EspInitialSas sas, bool probe_answered);
    void stop_esp();
    Status start_https();
    void stop_https();
    Status switch_to_https(const std::string& reason);
    Status switch_to_esp(const std::string& reason);

    // One control-loop step for the transport in use.
    Status step_esp(Clock::time_point now);
    Status step_https(Clock::time_point now);
    Status rekey_esp();
    void begin_esp_retry(Clock::time_point now);

    // Reconnecting (outage_ active): both transports lost; attempts by its ReconnectPolicy.
    // lose_transport stops whatever runs and starts the outage, or schedules the next attempt.
    void lose_transport(const std::string& why);
    Status step_outage(Clock::time_point now);
    Status reconnect_attempt();
    bool refetch_refused_cookie() const { return links_.cookie_rejected && links_.cookie_rejected(); }
    void forget_connections() {
        if (links_.forget_connections) links_.forget_connections();
    }
    datapath::DatapathStats stats() const;

    const GpTunnelSetup& setup_;
    const GpTunnelOptions& o_;
    const GpGatewayLinks& links_;
    std::optional<TunnelHost> host_;  // tun + its configuration (netlink or --script)
    io::TunDevice* tun_ = nullptr;     // host_'s device, once up
    std::optional<io::UdpSocket> udp_;
    bool ever_connected_ = false;
    bool reconnecting_ = false;  // SIGUSR2: `reconnect` script once ESP answers again
    unsigned rekey_after_s_ = 0;  // the current keys' lifetime (getconfig <timeout>)
    int mtu_ = 0;
    datapath::EspDatapathOptions esp_options_;
    bool esp_possible_ = false;   // ESP allowed, keys offered, a socket open

    mutable std::mutex mu_;       // the datapath pointers, against the stats reporter thread
    Transport transport_ = Transport::none;
    std::uint64_t switches_ = 0;
    std::unique_ptr<datapath::EspDatapath> esp_;
    std::unique_ptr<datapath::HttpsDatapath> https_;

    // ESP state.
    bool connected_ = false;
    Clock::time_point probing_since_, last_probe_, connected_at_;
    // HTTPS state.
    Clock::time_point https_since_, last_keepalive_, next_esp_retry_ = Clock::time_point::max();
    unsigned https_failures_ = 0;  // connections lost in a row before anything arrived
    std::unique_ptr<EspProber> prober_;
    Clock::time_point prober_since_;
    bool cookie_rejected_ = false;
    Clock::time_point rekey_at_ = Clock::time_point::max();
    Outage outage_;
};

void GpTunnel::mark_connected() {
    if (outage_.active()) {
        const Clock::time_point now = Clock::now();
        LOG_INFO << "reconnected over " << (transport_ == Transport::esp ? "ESP" : "the HTTPS tunnel") << " after "
                 << outage_.policy().attempts() << " attempt(s); outage " << ms_between(outage_.policy().lost_at(), now)
                 << " ms since the transport was declared lost";
        outage_.end(now);
        reconnecting_ = true;
    }
    if (reconnecting_) host_->queue_script(hooks::ScriptReason::reconnect);  // not awaited
    reconnecting_ = false;
    if (!ever_connected_ && o_.on_connected) o_.on_connected();
    ever_connected_ = true;
}

// The probe target and key lifetime of a (re)fetched configuration.
Status GpTunnel::take_esp_setup(const GpEspSetup& esp) {
    esp_options_.probe = {};
    if (!esp.probe_ipv4.empty() && !esp.tunnel_ipv4.empty()) {
        auto target = datapath::ProbeTarget::parse(esp.tunnel_ipv4, esp.probe_ipv4);
        if (!target) return make_error("ESP probe: " + target.error().message);
        esp_options_.probe = *target;
    }
    rekey_after_s_ = esp.rekey_after_s;
    return {};
}

Status GpTunnel::open_esp_socket(const GpEspSetup& esp) {
    io::UdpOptions u;
    u.remote = io::endpoint_text(esp.peer_address, esp.udp_port);
    if (o_.udp_local_port > 0) u.local = io::any_endpoint_like(esp.peer_address, o_.udp_local_port);
    udp_.reset();
    auto udp = io::UdpSocket::open(u);
    if (!udp) return make_error("ESP socket to " + u.remote + ": " + udp.error().message);
    udp_.emplace(std::move(*udp));
    return {};
}

datapath::DatapathStats GpTunnel::stats() const {
    std::lock_guard lock(mu_);
    datapath::DatapathStats s;
    if (esp_) s = esp_->stats();
    if (https_) s.https = https_->stats();
    s.transport = transport_;
    s.transport_switches = switches_;
    return s;
}

Status GpTunnel::start_esp(datapath::EspInitialSas sas, bool probe_answered) {
    const Clock::time_point now = Clock::now();
    auto dp = datapath::EspDatapath::start(*tun_, *udp_, esp_options_, std::move(sas));
    if (!dp) return dp.error();
    std::lock_guard lock(mu_);
    esp_ = std::move(*dp);
    transport_ = Transport::esp;
    connected_ = probe_answered || !esp_options_.probe.enabled();
    probing_since_ = connected_at_ = now;
    last_probe_ = {};
    return {};
}

void GpTunnel::stop_esp() {
    if (!esp_) return;
    esp_->stop();
    LOG_INFO << "ESP statistics:\n" << esp_->stats().to_text();
    std::lock_guard lock(mu_);
    esp_.reset();
    transport_ = Transport::none;
}

Status GpTunnel::start_https() {
    if (!links_.connect || !links_.cookie) return make_error("HTTPS tunnel: no way to reach the gateway over TLS");
    auto tls = links_.connect();
    if (!tls) return make_error("HTTPS tunnel: " + tls.error().message);
    Status started = start_https_tunnel(**tls, *links_.cookie, setup_.https_tunnel_path, &cookie_rejected_);
    if (!started && !cookie_rejected_) {
        // The kept-alive login connection may have been closed by the server meanwhile: once more on a new one.
        LOG_DEBUG << started.error().message << "; retrying on a new connection";
        tls = links_.connect();
        if (!tls) return make_error("HTTPS tunnel: " + tls.error().message);
        started = start_https_tunnel(**tls, *links_.cookie, setup_.https_tunnel_path, &cookie_rejected_);
    }
    if (!started) return started;
    const std::string endpoint = (*tls)->endpoint() + ", " + (*tls)->description();
    datapath::HttpsDatapathOptions h;
    h.max_inner_size = h.tun_mtu = static_cast<std::size_t>(mtu_);
    h.max_frame_payload = std::max<std::size_t>(16384, static_cast<std::size_t>(mtu_));
    auto dp = datapath::HttpsDatapath::start(*tun_, std::move(*tls), h);
    if (!dp) return dp.error();
    const Clock::time_point now = Clock::now();
    {
        std::lock_guard lock(mu_);
        https_ = std::move(*dp);
        transport_ = Transport::https;
    }
    https_since_ = now;
    last_keepalive_ = {};
    next_esp_retry_ = esp_possible_ && esp_options_.probe.enabled() && o_.esp_retry_interval.count() > 0
                          ? now + o_.esp_retry_interval
                          : Clock::time_point::max();
    LOG_INFO << "HTTPS tunnel up to " << endpoint << ", MTU " << mtu_;
    return {};
}

void GpTunnel::stop_https() {
    if (!https_) return;
    https_->stop();
    datapath::DatapathStats s;
    s.transport = Transport::https;
    s.https = https_->stats();
    LOG_INFO << "HTTPS tunnel statistics:\n" << s.to_text();
    std::lock_guard lock(mu_);
    https_.reset();
    transport_ = Transport::none;
}

Status GpTunnel::switch_to_https(const std::string& reason) {
    LOG_INFO << "switching to the HTTPS tunnel: " << reason;
    stop_esp();
    prober_.reset();
    if (Status s = start_https(); !s) {
        if (cookie_rejected_) return s;
        lose_transport(reason + "; " + s.error().message);
        return {};
    }
    ++switches_;
    https_failures_ = 0;
    mark_connected();
    return {};
}

Status GpTunnel::switch_to_esp(const std::string& reason) {
    LOG_INFO << "switching back to ESP: " << reason << "; closing the HTTPS tunnel";
    stop_https();
    datapath::EspInitialSas sas = prober_->release_sas();
    prober_.reset();
    if (Status s = start_esp(std::move(sas), true); !s) return s;
    ++switches_;
    LOG_INFO << "ESP connected again; " << tun_->name() << " carries its traffic over ESP";
    mark_connected();
    return {};
}

Status GpTunnel::step_esp(Clock::time_point now) {
    datapath::EspLiveness live = esp_->liveness();
    if (!connected_) {
        if (live.last_probe_reply > probing_since_) {
            connected_ = true;
            connected_at_ = now;
            LOG_INFO << "ESP connected: probe answered after " << ms_between(probing_since_, now) << " ms; "
                     << tun_->name() << " is up";
            mark_connected();
        } else if (now - probing_since_ > o_.probe_timeout) {
            return switch_to_https("no answer to the ESP probe within " + std::to_string(o_.probe_timeout.count()) +
                                   " s (UDP blocked?)");
        } else if (now - last_probe_ >= std::chrono::seconds(1)) {
            esp_->send_probe();
            last_probe_ = now;
        }
    } else if (esp_options_.probe.enabled()) {
        auto quiet = now - std::max(live.last_rx, connected_at_);
        if (quiet > o_.dead_after) {
            forget_connections();
            return switch_to_https("ESP dead: nothing received for " +
                                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(quiet).count()) +
                                   " s");
        } else if (quiet > o_.dpd_interval && now - last_probe_ > dpd_repeat()) {
            esp_->send_probe();
            last_probe_ = now;
        }
    }
    if (auto f = esp_->failure()) return make_error("datapath stopped: " + *f);
    return {};
}

// A fresh getconfig (the HTTPS tunnel voided the old ESP keys), then a few
// probes on the new SAs; the HTTPS tunnel carries the traffic meanwhile.
void GpTunnel::begin_esp_retry(Clock::time_point now) {
    next_esp_retry_ = now + o_.esp_retry_interval;
    auto fresh = links_.refetch();
    if (!fresh) {
        LOG_WARN << "ESP retry: new configuration refused: " << fresh.error().message;
        return;
    }
    if (!fresh->esp) {
        LOG_INFO << "ESP retry: the gateway offers no ESP keys now; staying on the HTTPS tunnel";
        return;
    }
    auto sas = build_sas(fresh->esp->sa);
    if (!sas) {
        LOG_WARN << "ESP retry: " << sas.error().message;
        return;
    }
    if (Status s = take_esp_setup(*fresh->esp); !s || !esp_options_.probe.enabled()) {
        LOG_WARN << "ESP retry: no usable probe address";
        return;
    }
    if (Status s = open_esp_socket(*fresh->esp); !s) {
        LOG_WARN << "ESP retry: " << s.error().message;
        return;
    }
    LOG_INFO << "ESP retry: probing with new keys (in=" << hex32(sas->inbound.spi())
             << " out=" << hex32(sas->outbound.spi()) << ") while the HTTPS tunnel carries the traffic";
    prober_ = std::make_unique<EspProber>(*udp_, std::move(sas->outbound), std::move(sas->inbound), esp_options_.probe);
    prober_since_ = now;
    prober_->send_probe();
    last_probe_ = now;
}

Status GpTunnel::step_https(Clock::time_point now) {
    const Clock::time_point last_rx = https_->last_rx();
    if (last_rx > https_since_) https_failures_ = 0;
    std::string lost;
    if (auto f = https_->failure()) {
        lost = *f;
    } else {
        auto quiet = now - std::max(last_rx, https_since_);
        if (quiet > o_.dead_after) {
            lost = "nothing received for " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(quiet).count()) + " s";
        } else if (quiet > o_.dpd_interval && now - last_keepalive_ > dpd_repeat()) {
            https_->send_keepalive();
            last_keepalive_ = now;
        }
    }
    if (!lost.empty()) {
        if (++https_failures_ > 3) {
            lose_transport("HTTPS tunnel lost " + std::to_string(https_failures_ - 1) + " times in a row; last: " + lost);
            return {};
        }
        LOG_WARN << "HTTPS tunnel lost (" << lost << "); reconnecting";
        stop_https();
        forget_connections();
        if (Status s = start_https(); !s) {
            if (cookie_rejected_) return s;
            lose_transport("HTTPS tunnel lost (" + lost + "); " + s.error().message);
        }
        return {};
    }
    if (prober_) {
        if (prober_->take_replies())
            return switch_to_esp("probe answered after " + std::to_string(ms_between(prober_since_, now)) + " ms");
        if (now - prober_since_ > o_.probe_timeout) {
            LOG_INFO << "ESP retry: " << prober_->probes_sent() << " probes unanswered; staying on the HTTPS tunnel, "
                     << "next try in " << o_.esp_retry_interval.count() << " s";
            prober_.reset();
        } else if (now - last_probe_ >= std::chrono::seconds(1)) {
            prober_->send_probe();
            last_probe_ = now;
        }
    } else if (now >= next_esp_retry_) {
        begin_esp_retry(now);
    }
    return {};
}

Status GpTunnel::rekey_esp() {
    LOG_INFO << "rekey: fetching new ESP keys";
    auto fresh = links_.refetch();
    if (!fresh && !refetch_refused_cookie()) {
        // The gateway may be restarting: the current keys stay in use; DPD notices if ESP dies.
        LOG_WARN << "rekey: " << fresh.error().message << "; trying again in 5 s";
        rekey_at_ = Clock::now() + std::chrono::seconds(5);
        return {};
    }
    if (!fresh) {
        cookie_rejected_ = true;
        return fresh.error();
    }
    if (!fresh->esp) return make_error("rekey: the gateway's new configuration has no ESP keys");
    auto sas = build_sas(fresh->esp->sa);
    if (!sas) return sas.error();
    std::uint32_t in_spi = sas->inbound.spi(), out_spi = sas->outbound.spi();
    // Inbound first: the new keys open packets before the peer could use them;
    // the old inbound SA stays beside it for the grace period.
    if (!esp_->install_inbound(std::move(sas->inbound)) || !esp_->install_outbound(std::move(sas->outbound)))
        return make_error("rekey: the datapath did not take the new SAs");
    rekey_after_s_ = fresh->esp->rekey_after_s;
    rekey_at_ = next_rekey(Clock::now());
    LOG_INFO << "rekey done: in=" << hex32(in_spi) << " out=" << hex32(out_spi);
    return {};
}

void GpTunnel::lose_transport(const std::string& why) {
    const Clock::time_point now = Clock::now();
    prober_.reset();
    stop_esp();
    stop_https();
    const Outage::Loss loss = outage_.lose(now, why);
    if (!loss.started) {
        LOG_INFO << loss.message;
        return;
    }
    LOG_WARN << loss.message;
    host_->queue_script(hooks::ScriptReason::attempt_reconnect);  // not awaited
}

// Between attempts: nothing runs but the tun (packets from it wait or drop in its queue).
Status GpTunnel::step_outage(Clock::time_point now) {
    if (!outage_.policy().attempt_due(now)) return {};
    LOG_INFO << outage_.begin_attempt(now) << ": new configuration with the same cookie";
    forget_connections();
    if (Status s = reconnect_attempt(); !s) {
        if (cookie_rejected_) return s;
        lose_transport(s.error().message);
    }
    return {};
}

// A getconfig with the session cookie (no login), then ESP with its new keys on a
// new socket (the probe decides: step_esp falls back to HTTPS), or HTTPS directly.
Status GpTunnel::reconnect_attempt() {
    auto fresh = links_.refetch();
    if (!fresh) {
        if (refetch_refused_cookie()) cookie_rejected_ = true;
        return make_error("getconfig: " + fresh.error().message);
    }
    const bool esp = o_.esp && fresh->esp;
    if (esp) {
        auto sas = build_sas(fresh->esp->sa);
        if (!sas) return sas.error();
        if (Status s = take_esp_setup(*fresh->esp); !s) return s;
        if (Status s = open_esp_socket(*fresh->esp); !s) return s;
        esp_possible_ = true;
        LOG_INFO << "reconnect: ESP to " << io::endpoint_text(fresh->esp->peer_address, fresh->esp->udp_port) << ", in=" << hex32(sas->inbound.spi())
                 << " out=" << hex32(sas->outbound.spi()) << "; probing";
        if (Status s = start_esp({std::move(sas->outbound), std::move(sas->inbound)}, false); !s) return s;
        rekey_at_ = next_rekey(Clock::now());
        if (connected_) mark_connected();  // no probe address: assumed up
        return {};
    }
    esp_possible_ = false;
    if (Status s = start_https(); !s) return s;
    mark_connected();
    return {};
}

Result<TunnelEnd> GpTunnel::run() {
    const GpEspSetup* esp = o_.esp ? (setup_.esp ? &*setup_.esp : nullptr) : nullptr;
    std::optional<EspSuite> suite;
    if (esp) {
        auto s = esp_suite_from_names(esp->sa.enc_algo, esp->sa.hmac_algo);
        if (!s) return s.error();
        suite = *s;
        if (Status st = take_esp_setup(*esp); !st) return st.error();
    }
    // The outer family is the gateway's also without ESP: an HTTPS-only tunnel over IPv6
    // was sized for IPv4 (20 bytes too large) when it was taken from the ESP peer.
    const int mtu = gp_tun_mtu({o_.mtu, setup_.config.mtu, o_.base_mtu, setup_.config.gateway_address,
                                suite ? suite->iv_size() : 0, suite ? suite->icv_size() : 0, suite.has_value()});

    SignalWatch signals;
    mtu_ = mtu;
    host_.emplace(TunnelHostOptions{o_.interface_name, o_.script, o_.log_level, o_.disable_ipv6});
    if (Status s = host_->bring_up(setup_.config, mtu); !s) return s.error();
    tun_ = &host_->tun();

    if (esp) {
        if (Status s = open_esp_socket(*esp); !s) return s.error();
        esp_possible_ = true;
        esp_options_.max_inner_size = static_cast<std::size_t>(mtu);
        esp_options_.tun_mtu = static_cast<std::size_t>(mtu);
        auto sas = build_sas(esp->sa);
        if (!sas) return sas.error();
        LOG_INFO << "ESP " << suite->name() << " to " << io::endpoint_text(esp->peer_address, esp->udp_port) << ", in=" << hex32(sas->inbound.spi())
                 << " out=" << hex32(sas->outbound.spi()) << ", MTU " << mtu;
        if (Status s = start_esp({std::move(sas->outbound), std::move(sas->inbound)}, false); !s) return s.error();
        if (connected_) {
            LOG_WARN << "no gw-address to probe: ESP assumed up";
            mark_connected();
        }
    } else {
        LOG_INFO << "using the HTTPS tunnel: "
                 << (o_.esp ? "the gateway offers no ESP keys" : "--no-dtls (no ESP)");
        if (Status s = start_https(); !s) {
            if (!cookie_rejected_) return s.error();
            LOG_ERROR << s.error().message;
            return TunnelEnd::cookie_rejected;
        }
        mark_connected();
    }
    if (o_.after_setup) {
        if (Status s = o_.after_setup(); !s) return s.error();
    }

    datapath::StatsReporterOptions r;
    r.json_path = o_.stats_json;
    auto reporter = datapath::StatsReporter::start([this] { return stats(); }, r);
    if (!reporter) return reporter.error();

    rekey_at_ = esp ? next_rekey(Clock::now()) : Clock::time_point::max();
    TunnelEnd end = TunnelEnd::user_logout;
    for (bool running = true; running;) {
        // The UDP socket only while the prober owns it (an ESP EspDatapath reads it otherwise).
        pollfd p[2] = {{signals.fd(), POLLIN, 0}, {prober_ ? udp_->fd() : -1, POLLIN, 0}};
        poll(p, 2, 100);
        for (int sig; (sig = signals.next()) != 0;) {
            if (sig == SIGHUP) {
                end = TunnelEnd::user_keep_cookie;
                running = false;
            } else if (sig == SIGUSR2) {
                // As openconnect: attempt-reconnect, then a new getconfig with the same
                // cookie (no login) whose SAs go in beside the old ones, then the probe
                // again; `reconnect` runs when it is answered. Traffic keeps flowing.
                if (outage_.active()) {
                    LOG_INFO << "SIGUSR2: next reconnect attempt now";
                    outage_.policy().attempt_now(Clock::now());
                    continue;
                }
                LOG_INFO << "SIGUSR2: reconnecting with the same session";
                host_->run_script(hooks::ScriptReason::attempt_reconnect);
                reconnecting_ = true;
                if (transport_ == Transport::esp) {
                    if (Status s = rekey_esp(); !s) {
                        LOG_ERROR << "reconnect: " << s.error().message;
                        end = TunnelEnd::error;
                        running = false;
                        break;
                    }
                    connected_ = false;
                    last_probe_ = {};
                    probing_since_ = Clock::now();
                } else if (esp_possible_ && !prober_) {
                    next_esp_retry_ = Clock::now();
                }
            } else {
                end = TunnelEnd::user_logout;
                running = false;
            }
        }
        if (!running) break;
        const Clock::time_point now = Clock::now();
        Status step;
        if (auto gave_up = outage_.given_up(now)) {
            step = make_error(*gave_up);
        } else if (transport_ == Transport::none) {
            step = step_outage(now);
        } else {
            step = transport_ == Transport::esp ? step_esp(now) : step_https(now);
        }
        if (step && transport_ != Transport::none && now >= rekey_at_) {
            rekey_at_ = next_rekey(now);
            if (transport_ == Transport::esp) {
                step = rekey_esp();
            } else if (!prober_ && esp_possible_) {
                begin_esp_retry(now);  // its getconfig renews the keys; ESP if it answers
            }
        }
        if (!step) {
            LOG_ERROR << step.error().message;
            end = cookie_rejected_                ? TunnelEnd::cookie_rejected
                  : outage_.active()              ? TunnelEnd::esp_failed
                  : transport_ == Transport::esp ? TunnelEnd::error
                                                 : TunnelEnd::esp_failed;
            break;
        }
    }
    // The reporter's last write (--stats-json) first, while the transports still hold their totals.
    reporter->reset();
    prober_.reset();
    stop_esp();
    stop_https();
    udp_.reset();
    tun_ = nullptr;
    host_.reset();  // disconnect script, DNS restored, the device goes (or our addresses/routes on a persistent one)
    return end;
}

}  // namespace

Result<TunnelEnd> run_gp_tunnel(const GpTunnelSetup& setup, const GpTunnelOptions& options,
                                const GpGatewayLinks& links) {
    GpTunnel tunnel(setup, options, links);
    return tunnel.run();
}

}  // namespace espvpn::session
