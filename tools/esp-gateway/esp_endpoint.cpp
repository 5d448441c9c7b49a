#include "tools/esp-gateway/esp_endpoint.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "src/datapath/esp/esp_datapath.h"
#include "src/datapath/stats_reporter.h"
#include "src/io/state_files.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"
#include "tools/esp-gateway/sa_env_file.h"

namespace espvpn::tools {

namespace {
using Clock = std::chrono::steady_clock;

struct EndpointOptions {
    std::string sa_file;
    std::string tun_name;
    std::vector<std::string> tun_addresses;
    std::vector<std::string> routes;
    unsigned mtu = 1400;
    unsigned max_inner = 0;  // 0: = mtu
    bool offload = true;
    bool udp_offload = true;  // UDP GSO on send, GRO on receive; off: one datagram per skb, as ASAs and ocserv send
    std::string udp_local;
    std::string udp_remote;
    std::string stats_json;
    int stats_interval_ms = 1000;
    std::string status_file;
    int seconds = 600;
    bool probe = true;
    std::string log_level = "info";
};

const char* program(EndpointRole role) { return role == EndpointRole::gateway ? "esp-gateway" : "esp-test-client"; }

void usage(EndpointRole role) {
    std::fprintf(stderr,
                 "usage: %s --sa-file FILE --tun-address ADDR/LEN [--tun-address ...] [--route PREFIX ...]\n"
                 "  [--tun-name NAME] [--mtu N] [--max-inner N] [--no-offload] [--no-udp-offload]\n"
                 "  %s\n"
                 "  [--stats-json FILE] [--stats-interval-ms N] [--status-file FILE] [--seconds N]\n"
                 "  [--log-level error|warn|info|debug|trace]\n"
                 "SA file: fake-gp-gateway --sa-file-format env; re-read when it changes (rekey).\n"
                 "SIGUSR1 prints the datapath counters; SIGINT/SIGTERM stop (the tun is removed).\n",
                 program(role),
                 role == EndpointRole::gateway ? "[--udp-local ADDR:PORT (default 0.0.0.0:4501)]"
                                           : "--udp-remote GW:PORT [--udp-local ADDR:PORT] [--no-probe]");
}

std::optional<EndpointOptions> parse(EndpointRole role, int argc, char** argv) {
    EndpointOptions o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::optional<std::string> {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s: %s needs a value\n", program(role), a.c_str());
                return std::nullopt;
            }
            return std::string(argv[++i]);
        };
        auto number = [&](auto& out) -> bool {
            auto v = value();
            if (!v) return false;
            char* end = nullptr;
            long n = std::strtol(v->c_str(), &end, 10);
            if (v->empty() || *end || n < 0) {
                std::fprintf(stderr, "%s: %s: '%s' is not a number\n", program(role), a.c_str(), v->c_str());
                return false;
            }
            out = static_cast<std::remove_reference_t<decltype(out)>>(n);
            return true;
        };
        bool ok = true;
        if (a == "--sa-file") { auto v = value(); ok = v.has_value(); if (v) o.sa_file = *v; }
        else if (a == "--tun-name") { auto v = value(); ok = v.has_value(); if (v) o.tun_name = *v; }
        else if (a == "--tun-address") { auto v = value(); ok = v.has_value(); if (v) o.tun_addresses.push_back(*v); }
        else if (a == "--route") { auto v = value(); ok = v.has_value(); if (v) o.routes.push_back(*v); }
        else if (a == "--udp-local") { auto v = value(); ok = v.has_value(); if (v) o.udp_local = *v; }
        else if (a == "--udp-remote" && role == EndpointRole::client) { auto v = value(); ok = v.has_value(); if (v) o.udp_remote = *v; }
        else if (a == "--stats-json") { auto v = value(); ok = v.has_value(); if (v) o.stats_json = *v; }
        else if (a == "--status-file") { auto v = value(); ok = v.has_value(); if (v) o.status_file = *v; }
        else if (a == "--log-level") { auto v = value(); ok = v.has_value(); if (v) o.log_level = *v; }
        else if (a == "--mtu") ok = number(o.mtu);
        else if (a == "--max-inner") ok = number(o.max_inner);
        else if (a == "--stats-interval-ms") ok = number(o.stats_interval_ms);
        else if (a == "--seconds") ok = number(o.seconds);
        else if (a == "--no-offload") o.offload = false;
        else if (a == "--no-udp-offload") o.udp_offload = false;
        else if (a == "--no-probe" && role == EndpointRole::client) o.probe = false;
        else if (a == "--help" || a == "-h") { usage(role); std::exit(0); }
        else {
            std::fprintf(stderr, "%s: unknown option %s\n", program(role), a.c_str());
            ok = false;
        }
        if (!ok) return std::nullopt;
    }
    if (o.sa_file.empty() || o.tun_addresses.empty()) {
        std::fprintf(stderr, "%s: --sa-file and --tun-address are required\n", program(role));
        return std::nullopt;
    }
    if (role == EndpointRole::client && o.udp_remote.empty()) {
        std::fprintf(stderr, "%s: --udp-remote is required\n", program(role));
        return std::nullopt;
    }
    if (role == EndpointRole::gateway && o.udp_local.empty()) o.udp_local = "0.0.0.0:4501";
    if (o.max_inner == 0) o.max_inner = o.mtu;
    return o;
}

std::string dirname_of(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}
std::string basename_of(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex32(std::uint32_t v) {
    char t[16];
    std::snprintf(t, sizeof t, "0x%08x", v);
    return t;
}

// The end that owns the tunnel: keys in, counters out.
class EspEndpoint {
public:
    EspEndpoint(EndpointRole role, EndpointOptions o) : role_(role), o_(std::move(o)) {}
    int run();

private:
    Status setup_tun();
    Status install(const SaFile& sa, bool first);
    bool sa_file_event(int inotify_fd);
    void reload();
    void write_status() const;
    void probe_tick(Clock::time_point now);

    EndpointRole role_;
    EndpointOptions o_;
    std::optional<io::TunDevice> tun_;
    std::optional<io::UdpSocket> udp_;
    std::unique_ptr<datapath::EspDatapath> dp_;
    io::LocalStateFiles files_;  // --stats-json
    std::uint64_t generation_ = 0;
    std::uint32_t c2s_spi_ = 0, s2c_spi_ = 0;  // a new SA pair even if a writer reuses a generation number
    bool connected_ = false;
    Clock::time_point last_probe_;
    Clock::time_point connected_at_;
    Clock::time_point probing_since_;
};

Status EspEndpoint::setup_tun() {
    io::TunOptions t;
    t.name = o_.tun_name;
    t.offload = o_.offload;
    auto tun = io::TunDevice::open(t);
    if (!tun) return tun.error();
    tun_.emplace(std::move(*tun));
    if (Status s = tun_->set_mtu(o_.mtu); !s) return s;
    for (const std::string& a : o_.tun_addresses) {
        auto addr = io::InterfaceAddress::parse(a);
        if (!addr) return make_error("--tun-address " + a + ": " + addr.error().message);
        if (Status s = tun_->add_address(*addr); !s) return s;
    }
    if (Status s = tun_->set_up(true); !s) return s;
    for (const std::string& r : o_.routes) {
        auto dst = io::InterfaceAddress::parse(r);
        if (!dst) return make_error("--route " + r + ": " + dst.error().message);
        if (Status s = tun_->add_route(*dst); !s) return s;
    }
    return {};
}

// Inbound first, so the new keys open packets before the peer could see ours.
Status EspEndpoint::install(const SaFile& sa, bool first) {
    const SaFileDirection& in = role_ == EndpointRole::gateway ? sa.c2s : sa.s2c;
    const SaFileDirection& out = role_ == EndpointRole::gateway ? sa.s2c : sa.c2s;
    auto inbound = sa.inbound(in);
    if (!inbound) return inbound.error();
    auto outbound = sa.outbound(out);
    if (!outbound) return outbound.error();
    if (!dp_->install_inbound(std::move(*inbound))) return make_error("datapath did not take the inbound SA");
    const bool ok = role_ == EndpointRole::gateway && !first
                        ? dp_->install_outbound_when_peer_uses(std::move(*outbound), in.spi)
                        : dp_->install_outbound(std::move(*outbound));
    if (!ok) return make_error("datapath did not take the outbound SA");
    generation_ = sa.generation;
    c2s_spi_ = sa.c2s.spi;
    s2c_spi_ = sa.s2c.spi;
    LOG_INFO << program(role_) << ": SA generation " << sa.generation << " " << sa.enc
             << (sa.auth.empty() ? "" : "/") << sa.auth << " in=" << hex32(in.spi) << " out=" << hex32(out.spi);
    if (role_ == EndpointRole::client) {  // probe the new SA
        connected_ = false;
        probing_since_ = Clock::now();
        last_probe_ = {};
    }
    write_status();
    return {};
}

void EspEndpoint::reload() {
    auto sa = SaFile::load(o_.sa_file);
    if (!sa) {
        LOG_WARN << sa.error().message;
        return;
    }
    if (sa->generation == generation_ && sa->c2s.spi == c2s_spi_ && sa->s2c.spi == s2c_spi_) return;
    if (Status s = install(*sa, false); !s) LOG_WARN << "SA generation " << sa->generation << ": " << s.error().message;
}

void EspEndpoint::write_status() const {
    if (o_.status_file.empty()) return;
    const std::string tmp = o_.status_file + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "generation=%llu\nconnected=%d\n", static_cast<unsigned long long>(generation_), connected_);
        std::fclose(f);
        std::rename(tmp.c_str(), o_.status_file.c_str());
    }
}

// GP style: a probe a second until one is answered; then one when the tunnel
// has been quiet for 10 s (DPD).
void EspEndpoint::probe_tick(Clock::time_point now) {
    if (role_ != EndpointRole::client || !o_.probe) return;
    const datapath::EspLiveness l = dp_->liveness();
    if (!connected_ && l.last_probe_reply >= probing_since_) {
        connected_ = true;
        connected_at_ = now;
        std::printf("esp connected: probe answered (generation %llu)\n", static_cast<unsigned long long>(generation_));
        std::fflush(stdout);
        write_status();
    }
    const bool due = connected_ ? now - l.last_rx > std::chrono::seconds(10) && now - last_probe_ > std::chrono::seconds(5)
                                : now - last_probe_ >= std::chrono::seconds(1);
    if (due) {
        dp_->send_probe();
        last_probe_ = now;
    }
}

bool EspEndpoint::sa_file_event(int inotify_fd) {
    alignas(inotify_event) char buf[4096];
    bool ours = false;
    const std::string name = basename_of(o_.sa_file);
    for (;;) {
        const ssize_t n = ::read(inotify_fd, buf, sizeof buf);
        if (n <= 0) break;
        for (char* p = buf; p < buf + n;) {
            auto* ev = reinterpret_cast<inotify_event*>(p);
            if (ev->len && name == ev->name) ours = true;
            p += sizeof(inotify_event) + ev->len;
        }
    }
    return ours;
}

int EspEndpoint::run() {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    // Blocked before any thread starts, so only the signalfd sees them.
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    const int sig_fd = ::signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    const int ino_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (sig_fd < 0 || ino_fd < 0 ||
        ::inotify_add_watch(ino_fd, dirname_of(o_.sa_file).c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        std::fprintf(stderr, "%s: watch %s: %s\n", program(role_), o_.sa_file.c_str(), std::strerror(errno));
        return 1;
    }
    const Clock::time_point started = Clock::now();
    const Clock::time_point deadline = started + std::chrono::seconds(o_.seconds);

    // The gateway may start long before the first getconfig (a login through a browser
    // takes what it takes): wait for the file for the whole run, or until a signal.
    auto sa = SaFile::load(o_.sa_file);
    while (!sa && Clock::now() < deadline) {
        pollfd p[2] = {{ino_fd, POLLIN, 0}, {sig_fd, POLLIN, 0}};
        ::poll(p, 2, 100);
        if (p[1].revents & POLLIN) return 0;
        sa_file_event(ino_fd);
        sa = SaFile::load(o_.sa_file);
    }
    if (!sa) {
        std::fprintf(stderr, "%s: %s\n", program(role_), sa.error().message.c_str());
        return 1;
    }
    if (Status s = setup_tun(); !s) {
        std::fprintf(stderr, "%s: tun: %s\n", program(role_), s.error().message.c_str());
        return 1;
    }
    io::UdpOptions u;
    u.local = o_.udp_local;
    u.remote = o_.udp_remote;
    u.gso = u.gro = o_.udp_offload;
    auto udp = io::UdpSocket::open(u);
    if (!udp) {
        std::fprintf(stderr, "%s: udp: %s\n", program(role_), udp.error().message.c_str());
        return 1;
    }
    udp_.emplace(std::move(*udp));

    datapath::EspDatapathOptions d;
    d.max_inner_size = o_.max_inner;
    d.tun_mtu = o_.mtu;
    d.learn_peer = role_ == EndpointRole::gateway;
    if (role_ == EndpointRole::client && o_.probe && !sa->client_ip.empty() && !sa->gw_address.empty()) {
        auto target = datapath::ProbeTarget::parse(sa->client_ip, sa->gw_address);
        if (!target) {
            std::fprintf(stderr, "%s: %s\n", program(role_), target.error().message.c_str());
            return 1;
        }
        d.probe = *target;
    }
    auto dp = datapath::EspDatapath::start(*tun_, *udp_, d);
    if (!dp) {
        std::fprintf(stderr, "%s: %s\n", program(role_), dp.error().message.c_str());
        return 1;
    }
    dp_ = std::move(*dp);
    if (Status s = install(*sa, true); !s) {
        std::fprintf(stderr, "%s: %s\n", program(role_), s.error().message.c_str());
        return 1;
    }
    datapath::StatsReporterOptions r;
    r.json_path = o_.stats_json;
    r.files = &files_;
    r.json_interval = std::chrono::milliseconds(o_.stats_interval_ms);
    auto reporter = datapath::StatsReporter::start([this] { return dp_->stats(); }, r);
    if (!reporter) {
        std::fprintf(stderr, "%s: %s\n", program(role_), reporter.error().message.c_str());
        return 1;
    }
    auto local = udp_->local_address();
    std::printf("ready tun=%s udp=%s offload=%d generation=%llu\n", tun_->name().c_str(),
                local ? local->to_string().c_str() : "?", tun_->offloads().vnet_hdr,
                static_cast<unsigned long long>(generation_));
    std::fflush(stdout);

    int exit_code = 0;
    pollfd fds[2] = {{sig_fd, POLLIN, 0}, {ino_fd, POLLIN, 0}};
    for (bool running = true; running;) {
        const int n = ::poll(fds, 2, 100);
        if (n < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo si;
            while (::read(sig_fd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGHUP) reload();
                else running = false;
            }
        }
        if ((fds[1].revents & POLLIN) && sa_file_event(ino_fd)) reload();
        const Clock::time_point now = Clock::now();
        probe_tick(now);
        if (auto f = dp_->failure()) {
            std::fprintf(stderr, "%s: datapath stopped: %s\n", program(role_), f->c_str());
            exit_code = 1;
            running = false;
        }
        if (now >= deadline) {
            std::fprintf(stderr, "%s: --seconds %d reached\n", program(role_), o_.seconds);
            running = false;
        }
    }
    dp_->stop();
    const datapath::DatapathStats final_stats = dp_->stats();
    reporter->reset();  // last JSON write
    std::printf("stats %s\n", final_stats.to_json().c_str());
    std::fflush(stdout);
    ::close(sig_fd);
    ::close(ino_fd);
    return exit_code;
}
}  // namespace

int run_esp_endpoint(EndpointRole role, int argc, char** argv) {
    auto o = parse(role, argc, argv);
    if (!o) {
        usage(role);
        return 2;
    }
    log::Config lc;
    auto level = log::parse_level(o->log_level);
    if (!level) {
        std::fprintf(stderr, "%s: unknown log level %s\n", program(role), o->log_level.c_str());
        return 2;
    }
    lc.level = *level;
    lc.ident = program(role);
    log::configure(lc);
    EspEndpoint peer(role, std::move(*o));
    return peer.run();
}

}  // namespace espvpn::tools
