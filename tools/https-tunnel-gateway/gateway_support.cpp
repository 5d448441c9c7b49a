#include "tools/https-tunnel-gateway/gateway_support.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "protocols/base/ascii.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"

namespace espvpn::tools {

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

std::optional<std::size_t> content_length(std::string_view head, std::size_t max) {
    const std::string v = header_value(head, "Content-Length");
    if (v.empty()) return 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (*end || v[0] == '-' || n > max) return std::nullopt;
    return static_cast<std::size_t>(n);
}

void write_json_file(const std::string& path, const std::string& json) {
    if (path.empty()) return;
    const std::string tmp = path + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "%s\n", json.c_str());
        std::fclose(f);
        std::rename(tmp.c_str(), path.c_str());
    }
}

std::optional<long> parse_count(const std::string& text, long max) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end || errno || n <= 0 || n >= max) return std::nullopt;
    return n;
}

bool parse_gateway_options(int argc, char** argv, GatewaySetup& gw, void (*usage)(), const OwnOptions& own) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const OptionValue value = [&](std::string& out) {
            if (i + 1 >= argc) return false;
            out = argv[++i];
            return true;
        };
        bool ok = true;
        std::string v;
        if (a == "--listen") ok = value(gw.listen);
        else if (a == "--cert") ok = value(gw.cert);
        else if (a == "--key") ok = value(gw.key);
        else if (a == "--tun-name") ok = value(gw.tun_name);
        else if (a == "--route") { ok = value(v); gw.routes.push_back(v); }
        else if (a == "--mtu" || a == "--seconds") {
            const auto n = value(v) ? parse_count(v, 1000000) : std::nullopt;
            ok = n.has_value();
            if (ok && a == "--mtu") gw.mtu = static_cast<unsigned>(*n);
            else if (ok) gw.seconds = static_cast<int>(*n);
        } else if (a == "--no-offload") gw.offload = false;
        else if (a == "--help" || a == "-h") { usage(); std::exit(0); }
        else if (!own(a, value, ok)) {
            std::fprintf(stderr, "%s: unknown option %s\n", gw.program, a.c_str());
            return false;
        }
        if (!ok) {
            std::fprintf(stderr, "%s: %s needs a (valid) value\n", gw.program, a.c_str());
            return false;
        }
    }
    return true;
}

ServerTls::ServerTls(gnutls_certificate_credentials_t cred, io::UniqueFd fd) : fd_(std::move(fd)) {
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

ServerTls::~ServerTls() { gnutls_deinit(session_); }

bool ServerTls::handshake() {
    int rc;
    do rc = gnutls_handshake(session_);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0) LOG_DEBUG << "TLS handshake: " << gnutls_strerror(rc);
    return rc >= 0;
}

bool ServerTls::read_more(std::string& buf) {
    char tmp[16384];
    ssize_t n;
    do n = gnutls_record_recv(session_, tmp, sizeof tmp);
    while (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
    return true;
}

std::size_t ServerTls::read_head(std::string& buf, std::size_t max) {
    std::size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos)
        if (buf.size() > max || !read_more(buf)) return 0;
    return end + 4;
}

bool ServerTls::write_all(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = gnutls_record_send(session_, bytes.data(), bytes.size());
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

gnutls_certificate_credentials_t load_server_credentials(const std::string& cert, const std::string& key,
                                                         const char* program) {
    gnutls_certificate_credentials_t cred = nullptr;
    gnutls_certificate_allocate_credentials(&cred);
    if (int rc = gnutls_certificate_set_x509_key_file(cred, cert.c_str(), key.c_str(), GNUTLS_X509_FMT_PEM); rc < 0) {
        std::fprintf(stderr, "%s: --cert/--key: %s\n", program, gnutls_strerror(rc));
        gnutls_certificate_free_credentials(cred);
        return nullptr;
    }
    return cred;
}

Result<io::TunDevice> open_gateway_tun(const std::string& name, bool offload, unsigned mtu,
                                       const std::vector<std::string>& routes) {
    io::TunOptions t;
    t.name = name;
    t.offload = offload;
    auto tun = io::TunDevice::open(t);
    if (!tun) return tun.error();
    Status st = tun->set_mtu(mtu);
    if (st) st = tun->set_up(true);
    for (const std::string& r : routes) {
        if (!st) break;
        auto dst = io::InterfaceAddress::parse(r);
        st = dst ? tun->add_route(*dst) : Status(make_error("--route " + r + ": " + dst.error().message));
    }
    if (!st) return st.error();
    return tun;
}

int AcceptLoop::run(const std::string& listen, int seconds, const char* program, const std::function<void()>& ready,
                    const std::function<void(io::UniqueFd)>& serve) {
    auto local = io::SocketAddress::parse(listen);
    if (!local) {
        std::fprintf(stderr, "%s: --listen %s: %s\n", program, listen.c_str(), local.error().message.c_str());
        return 1;
    }
    io::UniqueFd lfd(::socket(local->family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    ::setsockopt(lfd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (!lfd.valid() || ::bind(lfd.get(), reinterpret_cast<const sockaddr*>(&local->storage), local->length) < 0 ||
        ::listen(lfd.get(), 16) < 0) {
        std::fprintf(stderr, "%s: listen on %s: %s\n", program, listen.c_str(), std::strerror(errno));
        return 1;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts: only the signalfd sees them
    io::UniqueFd sfd(::signalfd(-1, &sigs, SFD_CLOEXEC));
    ready();

    std::vector<std::thread> threads;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p[2] = {{lfd.get(), POLLIN, 0}, {sfd.get(), POLLIN, 0}};
        if (::poll(p, 2, 200) < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) break;
        if (p[0].revents & POLLIN) {
            io::UniqueFd c(::accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (c.valid()) threads.emplace_back([&serve, fd = std::move(c)]() mutable { serve(std::move(fd)); });
        }
    }
    stop = true;  // a tunnel ends at once; a connection in the HTTP phase when its socket is shut down
    {
        std::lock_guard<std::mutex> l(mutex_);
        for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    }
    for (std::thread& th : threads) th.join();
    return 0;
}

// Forgotten before the connection's socket closes, so the exit never shuts down a reused fd number.
AcceptLoop::Tracked::Tracked(AcceptLoop& loop, int fd) : loop_(loop), fd_(fd) {
    std::lock_guard<std::mutex> l(loop_.mutex_);
    loop_.conns_.push_back(fd_);
}

AcceptLoop::Tracked::~Tracked() {
    std::lock_guard<std::mutex> l(loop_.mutex_);
    loop_.conns_.erase(std::find(loop_.conns_.begin(), loop_.conns_.end(), fd_));
}

TlsGateway::~TlsGateway() {
    if (server_cred_) gnutls_certificate_free_credentials(server_cred_);
}

int TlsGateway::serve_until_stopped(const GatewaySetup& s, const std::function<void(io::UniqueFd)>& serve) {
    server_cred_ = load_server_credentials(s.cert, s.key, s.program);
    if (!server_cred_) return 1;
    auto tun = open_gateway_tun(s.tun_name, s.offload, s.mtu, s.routes);
    if (!tun) {
        std::fprintf(stderr, "%s: tun: %s\n", s.program, tun.error().message.c_str());
        return 1;
    }
    tun_.emplace(std::move(*tun));
    return loop_.run(
        s.listen, s.seconds, s.program,
        [&] {
            std::printf("ready listen=%s%s%s tun=%s offload=%d\n", s.listen.c_str(), s.ready_extra.empty() ? "" : " ",
                        s.ready_extra.c_str(), tun_->name().c_str(), tun_->offloads().vnet_hdr);
            std::fflush(stdout);
        },
        serve);
}

}  // namespace espvpn::tools
