// https-tunnel-gateway: the gateway end of GP's HTTPS tunnel for benchmarks and
// tests, on the project's own TLS pipeline (datapath::TlsPump with GP framing,
// tun offloads), so that the gateway is not what paces an HTTPS-tunnel row:
// fake-gp-gateway's Python bridge ran at 96-100 % of a core there.
//
// It terminates TLS on --listen and relays each HTTP request, as it came, to
// fake-gp-gateway (--backend, over TLS: its login, getconfig, logout and its
// check of the tunnel GET's cookie stay the fake's). When the fake answers a
// tunnel GET with START_TUNNEL (fake-gp-gateway --tunnel-external), that client
// connection becomes the tunnel: frames <-> the tun. One tunnel at a time; a
// second one is refused with 503 while the first runs.
//
// Requests are relayed one at a time per connection (no pipelining), their bodies
// by Content-Length; replies as http::ResponseParser frames them. Keepalive frames
// from the client are echoed, as a gateway does (the client's DPD for GP).
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "protocols/base/ascii.h"
#include "protocols/http/response_parser.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/tls/tls_pump.h"
#include "src/io/tls_stream.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/io/unique_fd.h"
#include "src/log/logger.h"

namespace espvpn::tools {
namespace {

constexpr const char* kProgram = "https-tunnel-gateway";
constexpr std::size_t kMaxHead = 64 * 1024;
constexpr std::size_t kMaxBody = 16 * 1024 * 1024;
constexpr std::string_view kStartTunnel = "START_TUNNEL";

struct Options {
    std::string listen = "0.0.0.0:4443";
    std::string backend;  // ADDRESS:PORT of fake-gp-gateway (numeric)
    std::string backend_ca;
    std::string cert, key;
    std::string tun_name;
    std::vector<std::string> routes;
    unsigned mtu = 1400;
    bool offload = true;
    std::string stats_json;  // the last tunnel's counters, written when it ends
    int seconds = 900;
};

void usage() {
    std::fprintf(stderr,
                 "usage: %s --backend ADDRESS:PORT --backend-ca FILE --cert FILE --key FILE\n"
                 "  [--listen ADDR:PORT (default 0.0.0.0:4443)] [--tun-name NAME] [--route PREFIX ...]\n"
                 "  [--mtu N] [--no-offload] [--stats-json FILE] [--seconds N]\n"
                 "The backend is fake-gp-gateway --tunnel-external; SIGINT/SIGTERM stop.\n",
                 kProgram);
}

std::optional<Options> parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        auto take = [&](std::string& out) {
            if (has_value) out = argv[++i];
            return has_value;
        };
        bool ok = true;
        std::string v;
        if (a == "--listen") ok = take(o.listen);
        else if (a == "--backend") ok = take(o.backend);
        else if (a == "--backend-ca") ok = take(o.backend_ca);
        else if (a == "--cert") ok = take(o.cert);
        else if (a == "--key") ok = take(o.key);
        else if (a == "--tun-name") ok = take(o.tun_name);
        else if (a == "--stats-json") ok = take(o.stats_json);
        else if (a == "--route") { ok = take(v); o.routes.push_back(v); }
        else if (a == "--mtu" || a == "--seconds") {
            ok = take(v);
            char* end = nullptr;
            const long n = ok ? std::strtol(v.c_str(), &end, 10) : 0;
            ok = ok && !v.empty() && !*end && n > 0 && n < 1000000;
            if (a == "--mtu") o.mtu = static_cast<unsigned>(n);
            else o.seconds = static_cast<int>(n);
        } else if (a == "--no-offload") o.offload = false;
        else if (a == "--help" || a == "-h") { usage(); std::exit(0); }
        else {
            std::fprintf(stderr, "%s: unknown option %s\n", kProgram, a.c_str());
            return std::nullopt;
        }
        if (!ok) {
            std::fprintf(stderr, "%s: %s needs a (valid) value\n", kProgram, a.c_str());
            return std::nullopt;
        }
    }
    if (o.backend.empty() || o.backend_ca.empty() || o.cert.empty() || o.key.empty()) {
        std::fprintf(stderr, "%s: --backend, --backend-ca, --cert and --key are required\n", kProgram);
        return std::nullopt;
    }
    return o;
}

// The value of header `name` in an HTTP head ("" if absent), case-insensitive.
std::string header_value(std::string_view head, std::string_view name) {
    std::size_t at = head.find("\r\n");
    while (at != std::string_view::npos && at + 2 < head.size()) {
        const std::size_t start = at + 2;
        const std::size_t end = head.find("\r\n", start);
        const std::string_view line = head.substr(start, end == std::string_view::npos ? end : end - start);
        const std::size_t colon = line.find(':');
        if (colon == name.size() && iequals(line.substr(0, colon), name)) {
            std::string_view value = line.substr(colon + 1);
            while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
            while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
            return std::string(value);
        }
        at = end;
    }
    return {};
}

// Content-Length of a head: 0 if absent, nullopt if malformed or too large.
std::optional<std::size_t> content_length(std::string_view head) {
    const std::string v = header_value(head, "Content-Length");
    if (v.empty()) return 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (*end || v[0] == '-' || n > kMaxBody) return std::nullopt;
    return static_cast<std::size_t>(n);
}

// A GnuTLS server session on an accepted socket (blocking, 30 s I/O timeouts).
class ServerTls {
public:
    ServerTls(gnutls_certificate_credentials_t cred, io::UniqueFd fd) : fd_(std::move(fd)) {
        gnutls_init(&session_, GNUTLS_SERVER);
        gnutls_set_default_priority(session_);
        gnutls_credentials_set(session_, GNUTLS_CRD_CERTIFICATE, cred);
        gnutls_transport_set_int(session_, fd_.get());
        gnutls_handshake_set_timeout(session_, 10000);
        const timeval tv{30, 0};
        ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        const int one = 1;
        ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ~ServerTls() { gnutls_deinit(session_); }
    ServerTls(const ServerTls&) = delete;
    ServerTls& operator=(const ServerTls&) = delete;

    bool handshake() {
        int rc;
        do rc = gnutls_handshake(session_);
        while (rc < 0 && !gnutls_error_is_fatal(rc));
        if (rc < 0) LOG_DEBUG << "TLS handshake: " << gnutls_strerror(rc);
        return rc >= 0;
    }
    // Appends what one record brings to `buf`; false on EOF or error.
    bool read_more(std::string& buf) {
        char tmp[16384];
        ssize_t n;
        do n = gnutls_record_recv(session_, tmp, sizeof tmp);
        while (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED);
        if (n <= 0) return false;
        buf.append(tmp, static_cast<std::size_t>(n));
        return true;
    }
    bool write_all(std::string_view bytes) {
        while (!bytes.empty()) {
            const ssize_t n = gnutls_record_send(session_, bytes.data(), bytes.size());
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
            if (n <= 0) return false;
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }
    gnutls_session_t native() const { return session_; }
    int fd() const { return fd_.get(); }

private:
    io::UniqueFd fd_;
    gnutls_session_t session_ = nullptr;
};

class Gateway {
public:
    explicit Gateway(Options o) : o_(std::move(o)) {}
    int run();

private:
    void serve(io::UniqueFd fd);
    // Relays one request (the head ends at head_end in `in`); false: close the connection.
    bool relay(ServerTls& client, std::string& in, std::size_t head_end,
               std::unique_ptr<io::TlsStream>& backend, bool& tunnel);
    void run_tunnel(ServerTls& client, std::string_view early);
    void write_stats(const datapath::TlsTunnelStats& s) const;
    std::unique_ptr<io::TlsStream> connect_backend() const;

    Options o_;
    std::string backend_host_;
    std::uint16_t backend_port_ = 0;
    gnutls_certificate_credentials_t server_cred_ = nullptr;
    std::shared_ptr<const io::TlsCredentials> backend_cred_;
    std::optional<io::TunDevice> tun_;
    std::mutex tunnel_mutex_;  // held while a tunnel runs: one at a time
    std::mutex conns_mutex_;
    std::vector<int> conns_;   // the client sockets being served (shut down at exit)
    std::atomic<bool> stop_{false};
    std::atomic<unsigned> tunnels_{0};
};

std::unique_ptr<io::TlsStream> Gateway::connect_backend() const {
    auto s = io::TlsStream::connect(backend_host_, backend_port_, backend_cred_);
    if (!s) {
        LOG_WARN << "backend " << o_.backend << ": " << s.error().message;
        return nullptr;
    }
    return std::move(*s);
}

bool Gateway::relay(ServerTls& client, std::string& in, std::size_t head_end,
                    std::unique_ptr<io::TlsStream>& backend, bool& tunnel) {
    const std::string_view head(in.data(), head_end);
    const auto body = content_length(head);
    if (!body) {
        client.write_all("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
    }
    const std::size_t request_size = head_end + *body;
    while (in.size() < request_size)
        if (!client.read_more(in)) return false;
    const std::string request = in.substr(0, request_size);
    in.erase(0, request_size);

    // The kept-alive backend connection, or a new one if the fake closed it.
    for (int tries = 0;; ++tries) {
        if (!backend) backend = connect_backend();
        if (!backend) {
            client.write_all("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return false;
        }
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(request.data());
        if (backend->write_all({bytes, request.size()})) break;
        backend.reset();
        if (tries == 1) return false;
    }

    // The reply, relayed as it came; http::ResponseParser says where it ends
    // (Content-Length, chunked, or the backend's EOF) and whether the connection stays.
    const std::string_view method = std::string_view(request).substr(0, request.find(' '));
    http::ResponseParser parser;
    parser.begin(method);
    std::string reply;
    std::size_t fed = 0;
    bool eof = false;
    std::uint8_t tmp[16384];
    while (!parser.done()) {
        auto n = backend->read_some(tmp);
        if (!n || *n == 0) {
            eof = true;
            if (Status st = parser.finish_eof(); !st) {
                LOG_WARN << "backend reply: " << st.error().message;
                return false;
            }
            break;
        }
        reply.append(reinterpret_cast<const char*>(tmp), *n);
        if (fed == 0 && reply.size() < kStartTunnel.size() && kStartTunnel.starts_with(reply)) continue;
        if (fed == 0 && reply.starts_with(kStartTunnel)) {
            backend.reset();  // the fake is done with it (--tunnel-external)
            if (!client.write_all(kStartTunnel)) return false;
            tunnel = true;
            return true;
        }
        auto used = parser.feed(std::string_view(reply).substr(fed));
        if (!used) {
            LOG_WARN << "backend reply: " << used.error().message;
            return false;
        }
        fed += *used;
    }
    reply.resize(fed);  // the backend sends nothing after a reply
    const bool close = eof || !parser.head().keep_alive;
    if (close) backend.reset();
    return client.write_all(reply) && !close;
}

void Gateway::serve(io::UniqueFd fd) {
    ServerTls client(server_cred_, std::move(fd));
    {
        std::lock_guard<std::mutex> l(conns_mutex_);
        conns_.push_back(client.fd());
    }
    struct Forget {  // before `client` closes the socket, so exit never shuts down a reused fd number
        Gateway* g;
        int fd;
        ~Forget() {
            std::lock_guard<std::mutex> l(g->conns_mutex_);
            g->conns_.erase(std::find(g->conns_.begin(), g->conns_.end(), fd));
        }
    } forget{this, client.fd()};
    if (!client.handshake()) return;
    std::unique_ptr<io::TlsStream> backend;
    std::string in;
    while (!stop_.load()) {
        std::size_t head_end;
        while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
            if (in.size() > kMaxHead || !client.read_more(in)) return;
        }
        bool tunnel = false;
        if (!relay(client, in, head_end + 4, backend, tunnel)) return;
        if (tunnel) {
            run_tunnel(client, in);
            return;
        }
    }
}

void Gateway::run_tunnel(ServerTls& client, std::string_view early) {
    std::unique_lock<std::mutex> one(tunnel_mutex_, std::try_to_lock);
    if (!one.owns_lock()) {
        LOG_WARN << "a second tunnel while one runs: closed";
        return;
    }
    const unsigned n = ++tunnels_;
    datapath::TlsPump pump(client.native(), client.fd(), *tun_, datapath::gp_framing(o_.mtu),
                           datapath::gp_pump_options(o_.mtu));
    const auto* e = reinterpret_cast<const std::uint8_t*>(early.data());
    if (Status s = pump.start({e, early.size()}); !s) {
        LOG_WARN << "tunnel " << n << ": " << s.error().message;
        return;
    }
    LOG_INFO << "tunnel " << n << " up";
    std::uint64_t echoed = 0;
    while (!stop_.load() && !pump.ended()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const std::uint64_t heard = pump.stats().rx_keepalives;
        for (; echoed < heard; ++echoed) pump.request_keepalive();
    }
    if (auto end = pump.ended()) LOG_INFO << "tunnel " << n << " ended: " << end->second;
    pump.stop();
    const datapath::TlsTunnelStats stats = pump.stats();
    write_stats(stats);
    std::string line;
    stats.for_each([&](std::string_view name, std::uint64_t x) {
        if (x) line.append(" ").append(name).append("=").append(std::to_string(x));
    });
    LOG_INFO << "tunnel " << n << " counters:" << line;
}

void Gateway::write_stats(const datapath::TlsTunnelStats& s) const {
    if (o_.stats_json.empty()) return;
    datapath::DatapathStats d;
    d.transport = datapath::Transport::https;
    d.https = s;
    const std::string tmp = o_.stats_json + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
        const std::string json = d.to_json();
        std::fprintf(f, "{\"tunnels\": %u, \"stats\": %s}\n", tunnels_.load(), json.c_str());
        std::fclose(f);
        std::rename(tmp.c_str(), o_.stats_json.c_str());
    }
}

int Gateway::run() {
    auto backend = io::SocketAddress::parse(o_.backend);
    if (!backend) {
        std::fprintf(stderr, "%s: --backend %s: %s\n", kProgram, o_.backend.c_str(), backend.error().message.c_str());
        return 2;
    }
    const auto* sa = reinterpret_cast<const sockaddr*>(&backend->storage);
    backend_host_ = io::numeric_host(sa);
    backend_port_ = ntohs(sa->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(sa)->sin_port
                                                   : reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
    io::TlsClientConfig bc;
    bc.system_trust = false;
    bc.ca_file = o_.backend_ca;
    auto cred = io::TlsCredentials::load(bc);
    if (!cred) {
        std::fprintf(stderr, "%s: --backend-ca: %s\n", kProgram, cred.error().message.c_str());
        return 1;
    }
    backend_cred_ = *cred;
    gnutls_certificate_allocate_credentials(&server_cred_);
    if (int rc = gnutls_certificate_set_x509_key_file(server_cred_, o_.cert.c_str(), o_.key.c_str(), GNUTLS_X509_FMT_PEM);
        rc < 0) {
        std::fprintf(stderr, "%s: --cert/--key: %s\n", kProgram, gnutls_strerror(rc));
        return 1;
    }

    io::TunOptions t;
    t.name = o_.tun_name;
    t.offload = o_.offload;
    auto tun = io::TunDevice::open(t);
    Status st = tun ? Status{} : Status(tun.error());
    if (tun) {
        tun_.emplace(std::move(*tun));
        st = tun_->set_mtu(o_.mtu);
        if (st) st = tun_->set_up(true);
        for (const std::string& r : o_.routes) {
            if (!st) break;
            auto dst = io::InterfaceAddress::parse(r);
            st = dst ? tun_->add_route(*dst) : Status(make_error("--route " + r + ": " + dst.error().message));
        }
    }
    if (!st) {
        std::fprintf(stderr, "%s: tun: %s\n", kProgram, st.error().message.c_str());
        return 1;
    }

    auto local = io::SocketAddress::parse(o_.listen);
    if (!local) {
        std::fprintf(stderr, "%s: --listen %s: %s\n", kProgram, o_.listen.c_str(), local.error().message.c_str());
        return 2;
    }
    io::UniqueFd lfd(::socket(local->family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    ::setsockopt(lfd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (!lfd.valid() || ::bind(lfd.get(), reinterpret_cast<const sockaddr*>(&local->storage), local->length) < 0 || ::listen(lfd.get(), 16) < 0) {
        std::fprintf(stderr, "%s: listen on %s: %s\n", kProgram, o_.listen.c_str(), std::strerror(errno));
        return 1;
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts: only the signalfd sees them
    io::UniqueFd sfd(::signalfd(-1, &sigs, SFD_CLOEXEC));
    std::printf("ready listen=%s tun=%s offload=%d\n", o_.listen.c_str(), tun_->name().c_str(),
                tun_->offloads().vnet_hdr);
    std::fflush(stdout);

    std::vector<std::thread> threads;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o_.seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p[2] = {{lfd.get(), POLLIN, 0}, {sfd.get(), POLLIN, 0}};
        if (::poll(p, 2, 200) < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) break;
        if (p[0].revents & POLLIN) {
            io::UniqueFd c(::accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (c.valid()) threads.emplace_back([this, fd = std::move(c)]() mutable { serve(std::move(fd)); });
        }
    }
    stop_ = true;  // a tunnel ends at once; a connection in the HTTP phase when its socket is shut down
    {
        std::lock_guard<std::mutex> l(conns_mutex_);
        for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    }
    for (std::thread& th : threads) th.join();
    gnutls_certificate_free_credentials(server_cred_);
    return 0;
}

}  // namespace
}  // namespace espvpn::tools

int main(int argc, char** argv) {
    auto o = espvpn::tools::parse(argc, argv);
    if (!o) {
        espvpn::tools::usage();
        return 2;
    }
    espvpn::log::Config lc;
    lc.ident = espvpn::tools::kProgram;
    espvpn::log::configure(lc);
    espvpn::tools::Gateway g(std::move(*o));
    return g.run();
}
