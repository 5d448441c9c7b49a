#include "src/session/esp_tunnel.h"

#include <poll.h>
#include <signal.h>

#include <memory>
#include <optional>

#include "crypto/esp_transform.h"
#include "protocols/esp/esp_sa.h"
#include "src/datapath/datapath.h"
#include "src/datapath/stats_reporter.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"
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

class EspTunnel {
public:
    EspTunnel(const GpTunnelSetup& setup, const EspTunnelOptions& options, const RefetchConfig& refetch)
        : setup_(setup), o_(options), refetch_(refetch) {}
    Result<TunnelEnd> run();

private:
    Status rekey();
    // openconnect's schedule: a minute before the keys expire (half-way for short lifetimes).
    Clock::time_point next_rekey(Clock::time_point from) const {
        if (rekey_after_s_ == 0) return Clock::time_point::max();
        return from + std::chrono::seconds(rekey_after_s_ > 120 ? rekey_after_s_ - 60 : rekey_after_s_ / 2);
    }

    const GpTunnelSetup& setup_;
    const EspTunnelOptions& o_;
    const RefetchConfig& refetch_;
    std::optional<io::UdpSocket> udp_;
    std::unique_ptr<datapath::Datapath> dp_;
    unsigned rekey_after_s_ = 0;  // the current keys' lifetime (getconfig <timeout>)
};

Status EspTunnel::rekey() {
    LOG_INFO << "rekey: fetching new ESP keys";
    auto fresh = refetch_();
    if (!fresh) return fresh.error();
    if (!fresh->esp) return make_error("rekey: the gateway's new configuration has no ESP keys");
    auto sas = build_sas(fresh->esp->sa);
    if (!sas) return sas.error();
    std::uint32_t in_spi = sas->inbound.spi(), out_spi = sas->outbound.spi();
    // Inbound first: the new keys open packets before the peer could use them;
    // the old inbound SA stays beside it for the grace period.
    if (!dp_->install_inbound(std::move(sas->inbound)) || !dp_->install_outbound(std::move(sas->outbound)))
        return make_error("rekey: the datapath did not take the new SAs");
    rekey_after_s_ = fresh->esp->rekey_after_s;
    LOG_INFO << "rekey done: in=" << hex32(in_spi) << " out=" << hex32(out_spi);
    return {};
}

Result<TunnelEnd> EspTunnel::run() {
    if (!setup_.esp) return make_error("the gateway offers no ESP keys (HTTPS tunnel fallback is not built yet)");
    const GpEspSetup& esp = *setup_.esp;
    rekey_after_s_ = esp.rekey_after_s;

    auto suite = esp_suite_from_names(setup_.esp->sa.enc_algo, setup_.esp->sa.hmac_algo);
    if (!suite) return suite.error();
    bool outer_v6 = esp.peer_address.find(':') != std::string::npos;
    int mtu = o_.mtu > 0 ? o_.mtu
                         : (setup_.config.mtu > 0 ? setup_.config.mtu
                                                  : esp_tunnel_mtu(o_.base_mtu, outer_v6, suite->iv_size(),
                                                                   suite->icv_size()));

    SignalWatch signals;
    TunnelHost host({o_.interface_name, o_.script, o_.log_level, o_.disable_ipv6});
    if (Status s = host.bring_up(setup_.config, mtu); !s) return s.error();
    io::TunDevice& tun = host.tun();

    io::UdpOptions u;
    u.remote = (outer_v6 ? "[" + esp.peer_address + "]" : esp.peer_address) + ":" + std::to_string(esp.udp_port);
    auto udp = io::UdpSocket::open(u);
    if (!udp) return make_error("ESP socket to " + u.remote + ": " + udp.error().message);
    udp_.emplace(std::move(*udp));

    datapath::DatapathOptions d;
    d.max_inner_size = static_cast<std::size_t>(mtu);
    d.tun_mtu = static_cast<std::size_t>(mtu);
    if (!esp.probe_ipv4.empty() && !esp.tunnel_ipv4.empty()) {
        auto target = datapath::ProbeTarget::parse(esp.tunnel_ipv4, esp.probe_ipv4);
        if (!target) return make_error("ESP probe: " + target.error().message);
        d.probe = *target;
    }
    auto dp = datapath::Datapath::start(tun, *udp_, d);
    if (!dp) return dp.error();
    dp_ = std::move(*dp);
    auto sas = build_sas(setup_.esp->sa);
    if (!sas) return sas.error();
    LOG_INFO << "ESP " << suite->name() << " to " << u.remote << ", in=" << hex32(sas->inbound.spi())
             << " out=" << hex32(sas->outbound.spi()) << ", MTU " << mtu;
    if (!dp_->install_inbound(std::move(sas->inbound)) || !dp_->install_outbound(std::move(sas->outbound)))
        return make_error("the datapath did not take the SAs");

    datapath::StatsReporterOptions r;
    r.json_path = o_.stats_json;
    auto reporter = datapath::StatsReporter::start([this] { return dp_->stats(); }, r);
    if (!reporter) return reporter.error();

    // Probe until answered (GP: 1 s apart), then DPD; rekey before the keys expire.
    const Clock::time_point started = Clock::now();
    Clock::time_point last_probe{}, connected_at{}, probing_since = started;
    bool connected = !d.probe.enabled();  // without a probe address, trust the keys
    if (connected) LOG_WARN << "no gw-address to probe: ESP assumed up";
    Clock::time_point rekey_at = next_rekey(started);
    TunnelEnd end = TunnelEnd::user_logout;
    for (bool running = true; running;) {
        pollfd p{signals.fd(), POLLIN, 0};
        poll(&p, 1, 100);
        for (int sig; (sig = signals.next()) != 0;) {
            if (sig == SIGHUP) {
                end = TunnelEnd::user_keep_cookie;
                running = false;
            } else if (sig == SIGUSR2) {
                LOG_INFO << "SIGUSR2: re-probing ESP";
                connected = false;
                last_probe = {};
                probing_since = Clock::now();
            } else {
                end = TunnelEnd::user_logout;
                running = false;
            }
        }
        if (!running) break;
        Clock::time_point now = Clock::now();
        datapath::Liveness live = dp_->liveness();
        if (!connected) {
            if (live.last_probe_reply > probing_since) {
                connected = true;
                connected_at = now;
                LOG_INFO << "ESP connected: probe answered after "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(now - probing_since).count() << " ms; "
                         << tun.name() << " is up";
            } else if (now - probing_since > o_.probe_timeout) {
                LOG_ERROR << "no answer to the ESP probe within " << o_.probe_timeout.count()
                          << " s (UDP blocked?); the HTTPS tunnel fallback is not built yet";
                end = TunnelEnd::esp_failed;
                break;
            } else if (now - last_probe >= std::chrono::seconds(1)) {
                dp_->send_probe();
                last_probe = now;
            }
        } else if (d.probe.enabled()) {
            auto quiet = now - std::max(live.last_rx, connected_at);
            if (quiet > o_.dead_after) {
                LOG_WARN << "ESP dead: nothing received for "
                         << std::chrono::duration_cast<std::chrono::seconds>(quiet).count() << " s; probing again";
                connected = false;
                last_probe = {};
                probing_since = now;
            } else if (quiet > o_.dpd_interval && now - last_probe > std::chrono::seconds(5)) {
                dp_->send_probe();
                last_probe = now;
            }
        }
        if (auto f = dp_->failure()) {
            LOG_ERROR << "datapath stopped: " << *f;
            end = TunnelEnd::error;
            break;
        }
        if (now >= rekey_at) {
            if (Status s = rekey(); !s) {
                LOG_ERROR << s.error().message;
                end = TunnelEnd::error;
                break;
            }
            rekey_at = next_rekey(now);
        }
    }
    dp_->stop();
    LOG_INFO << "tunnel statistics:\n" << dp_->stats().to_text();
    reporter->reset();
    dp_.reset();
    udp_.reset();
    host.tear_down();
    return end;
}

}  // namespace

Result<TunnelEnd> run_esp_tunnel(const GpTunnelSetup& setup, const EspTunnelOptions& options,
                                 const RefetchConfig& refetch) {
    EspTunnel tunnel(setup, options, refetch);
    return tunnel.run();
}

}  // namespace espvpn::session
