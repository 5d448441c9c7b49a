#include "src/session/esp_tunnel.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <memory>
#include <optional>

#include "crypto/esp_transform.h"
#include "protocols/esp/esp_sa.h"
#include "src/datapath/datapath.h"
#include "src/datapath/stats_reporter.h"
#include "src/hooks/host_dns.h"
#include "src/hooks/script_runner.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"

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

// Blocks the signals the control loop reads from a signalfd, in this thread
// before any other starts, so every thread inherits the mask.
class SignalWatch {
public:
    SignalWatch() {
        sigemptyset(&set_);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR2}) sigaddset(&set_, s);
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
        fd_ = signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
    }
    ~SignalWatch() {
        if (fd_ >= 0) close(fd_);
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    int fd() const { return fd_; }
    // 0 when none is pending.
    int next() {
        signalfd_siginfo si;
        return read(fd_, &si, sizeof si) == sizeof si ? static_cast<int>(si.ssi_signo) : 0;
    }

private:
    sigset_t set_{}, old_{};
    int fd_ = -1;
};

class EspTunnel {
public:
    EspTunnel(const GpTunnelSetup& setup, const EspTunnelOptions& options, const RefetchConfig& refetch)
        : setup_(setup), o_(options), refetch_(refetch) {}
    Result<TunnelEnd> run();

private:
    Status open_tun(int mtu);
    Status configure_host();
    hooks::ScriptEnv script_env(hooks::ScriptReason reason) const;
    void run_script(hooks::ScriptReason reason);
    Status rekey();
    Status reconnect();
    // openconnect's schedule: a minute before the keys expire (half-way for short lifetimes).
    Clock::time_point next_rekey(Clock::time_point from) const {
        if (rekey_after_s_ == 0) return Clock::time_point::max();
        return from + std::chrono::seconds(rekey_after_s_ > 120 ? rekey_after_s_ - 60 : rekey_after_s_ / 2);
    }

    const GpTunnelSetup& setup_;
    const EspTunnelOptions& o_;
    const RefetchConfig& refetch_;
    std::optional<io::TunDevice> tun_;
    std::optional<io::UdpSocket> udp_;
    std::unique_ptr<hooks::ScriptRunner> scripts_;
    std::unique_ptr<hooks::HostDns> dns_;  // built-in setup only; restores on reset
    std::unique_ptr<datapath::Datapath> dp_;
    unsigned rekey_after_s_ = 0;  // the current keys' lifetime (getconfig <timeout>)
    int mtu_ = 0;
};

hooks::ScriptEnv EspTunnel::script_env(hooks::ScriptReason reason) const {
    TunnelConfig c = setup_.config;
    c.mtu = mtu_;
    hooks::ScriptContext ctx{reason, tun_ ? tun_->name() : o_.interface_name, static_cast<int>(getpid()),
                             o_.log_level};
    return hooks::build_script_env(c, ctx);
}

void EspTunnel::run_script(hooks::ScriptReason reason) {
    if (!scripts_) return;
    // Awaited by the control thread only; the datapath keeps forwarding meanwhile.
    scripts_->run(script_env(reason)).wait();
}

Status EspTunnel::open_tun(int mtu) {
    io::TunOptions t;
    t.name = o_.interface_name;
    auto tun = io::TunDevice::open(t);
    if (!tun) return make_error("tun device: " + tun.error().message);
    tun_.emplace(std::move(*tun));
    LOG_INFO << "tun device " << tun_->name() << " (offloads: " << (tun_->offloads().tso ? "TSO" : "none")
             << (tun_->offloads().uso ? "+USO" : "") << ")";
    mtu_ = mtu;
    return {};
}

// Without --script: addresses, MTU and split routes through netlink.
Status EspTunnel::configure_host() {
    const TunnelConfig& c = setup_.config;
    if (Status s = tun_->set_mtu(static_cast<unsigned>(mtu_)); !s) return s;
    auto add = [&](const std::string& text) -> Status {
        auto a = io::InterfaceAddress::parse(text);
        if (!a) return make_error("address " + text + ": " + a.error().message);
        return tun_->add_address(*a);
    };
    if (!c.ip4_address.empty()) {
        if (Status s = add(c.ip4_address + "/32"); !s) return s;
    }
    if (!c.ip6_address.empty() && !o_.disable_ipv6) {
        if (Status s = add(c.ip6_address + "/" + std::to_string(c.ip6_prefix)); !s) return s;
    }
    if (Status s = tun_->set_up(true); !s) return s;
    for (const IpPrefix& r : c.split_include) {
        if (r.v6 && o_.disable_ipv6) continue;
        if (r.length == 0) {
            LOG_WARN << "default route " << r.to_string()
                     << " not installed by the built-in setup (use --script for full routing)";
            continue;
        }
        auto dst = io::InterfaceAddress::parse(r.to_string());
        if (!dst) return make_error("route " + r.to_string() + ": " + dst.error().message);
        if (Status s = tun_->add_route(*dst); !s) return make_error("route " + r.to_string() + ": " + s.error().message);
    }
    if (c.split_include.empty())
        LOG_WARN << "the gateway sends all traffic (no split routes); the built-in setup adds no default route: "
                    "use --script (vpnc-script) for that";
    if (!c.dns.empty()) {
        auto dns = hooks::HostDns::apply(hooks::built_in_dns_settings(c, tun_->name(), tun_->ifindex(), getpid()));
        if (!dns) LOG_WARN << "DNS not configured: " << dns.error().message;
        else dns_ = std::move(*dns);
    }
    return {};
}

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

// SIGUSR2, as openconnect: attempt-reconnect, then a new getconfig with the same
// cookie (no login) whose SAs go in beside the old ones, then the probe again;
// `reconnect` runs when it is answered. The datapath keeps forwarding throughout.
Status EspTunnel::reconnect() {
    LOG_INFO << "SIGUSR2: reconnecting with the same session";
    run_script(hooks::ScriptReason::attempt_reconnect);
    return rekey();
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
    if (!o_.script.empty()) scripts_ = std::make_unique<hooks::ScriptRunner>(o_.script);
    mtu_ = mtu;
    run_script(hooks::ScriptReason::pre_init);
    if (Status s = open_tun(mtu); !s) return s.error();
    if (scripts_) {
        run_script(hooks::ScriptReason::connect);
    } else if (Status s = configure_host(); !s) {
        return make_error("host setup: " + s.error().message);
    }

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
    auto dp = datapath::Datapath::start(*tun_, *udp_, d);
    if (!dp) return dp.error();
    dp_ = std::move(*dp);
    auto sas = build_sas(setup_.esp->sa);
    if (!sas) return sas.error();
    LOG_INFO << "ESP " << suite->name() << " to " << u.remote << ", in=" << hex32(sas->inbound.spi())
             << " out=" << hex32(sas->outbound.spi()) << ", MTU " << mtu;
    if (!dp_->install_inbound(std::move(sas->inbound)) || !dp_->install_outbound(std::move(sas->outbound)))
        return make_error("the datapath did not take the SAs");
    if (o_.after_setup) {
        if (Status s = o_.after_setup(); !s) return s.error();
    }

    datapath::StatsReporterOptions r;
    r.json_path = o_.stats_json;
    auto reporter = datapath::StatsReporter::start([this] { return dp_->stats(); }, r);
    if (!reporter) return reporter.error();

    // Probe until answered (GP: 1 s apart), then DPD; rekey before the keys expire.
    const Clock::time_point started = Clock::now();
    Clock::time_point last_probe{}, connected_at{}, probing_since = started;
    bool connected = !d.probe.enabled();  // without a probe address, trust the keys
    bool reconnecting = false, ever_connected = connected;
    if (connected) {
        LOG_WARN << "no gw-address to probe: ESP assumed up";
        if (o_.on_connected) o_.on_connected();
    }
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
                if (Status s = reconnect(); !s) {
                    LOG_ERROR << "reconnect: " << s.error().message;
                    end = TunnelEnd::error;
                    running = false;
                    break;
                }
                rekey_at = next_rekey(Clock::now());
                reconnecting = true;
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
                         << tun_->name() << " is up";
                if (reconnecting && scripts_) scripts_->run(script_env(hooks::ScriptReason::reconnect));
                reconnecting = false;
                if (!ever_connected && o_.on_connected) o_.on_connected();
                ever_connected = true;
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
    run_script(hooks::ScriptReason::disconnect);
    scripts_.reset();
    dns_.reset();
    dp_.reset();
    udp_.reset();
    tun_.reset();  // removes the device (or our addresses/routes on a persistent one)
    return end;
}

}  // namespace

Result<TunnelEnd> run_esp_tunnel(const GpTunnelSetup& setup, const EspTunnelOptions& options,
                                 const RefetchConfig& refetch) {
    EspTunnel tunnel(setup, options, refetch);
    return tunnel.run();
}

}  // namespace espvpn::session
