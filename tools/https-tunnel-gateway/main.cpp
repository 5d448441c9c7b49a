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
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "protocols/http/response_parser.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/tls/tls_pump.h"
#include "src/io/tls_stream.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/io/unique_fd.h"
#include "src/log/logger.h"
#include "tools/https-tunnel-gateway/gateway_support.h"

namespace espvpn::tools {
namespace {

constexpr const char* kProgram = "https-tunnel-gateway";
constexpr std::size_t kMaxHead = 64 * 1024;
constexpr std::size_t kMaxBody = 16 * 1024 * 1024;
constexpr std::string_view kStartTunnel = "START_TUNNEL";

struct Options {
    GatewaySetup gw;  // certificate, tun (MTU 1400), listener, lifetime
    std::string backend;  // ADDRESS:PORT of fake-gp-gateway (numeric)
    std::string backend_ca;
    std::string stats_json;  // the last tunnel's counters, written when it ends
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
    o.gw.program = kProgram;
    auto own = [&o](const std::string& a, const OptionValue& value, bool& ok) {
        if (a == "--backend") ok = value(o.backend);
        else if (a == "--backend-ca") ok = value(o.backend_ca);
        else if (a == "--stats-json") ok = value(o.stats_json);
        else return false;
        return true;
    };
    if (!parse_gateway_options(argc, argv, o.gw, usage, own)) return std::nullopt;
    if (o.backend.empty() || o.backend_ca.empty() || o.gw.cert.empty() || o.gw.key.empty()) {
        std::fprintf(stderr, "%s: --backend, --backend-ca, --cert and --key are required\n", kProgram);
        return std::nullopt;
    }
    return o;
}

class Gateway : TlsGateway {
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
    std::shared_ptr<const io::TlsCredentials> backend_cred_;
    std::mutex tunnel_mutex_;  // held while a tunnel runs: one at a time
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
    const auto body = content_length(head, kMaxBody);
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
    AcceptLoop::Tracked tracked(loop_, client.fd());
    if (!client.handshake()) return;
    std::unique_ptr<io::TlsStream> backend;
    std::string in;
    while (!loop_.stop.load()) {
        const std::size_t head_size = client.read_head(in, kMaxHead);
        if (head_size == 0) return;
        bool tunnel = false;
        if (!relay(client, in, head_size, backend, tunnel)) return;
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
    datapath::TlsPump pump(client.native(), client.fd(), *tun_, datapath::gp_framing(o_.gw.mtu),
                           datapath::gp_pump_options(o_.gw.mtu));
    const auto* e = reinterpret_cast<const std::uint8_t*>(early.data());
    if (Status s = pump.start({e, early.size()}); !s) {
        LOG_WARN << "tunnel " << n << ": " << s.error().message;
        return;
    }
    LOG_INFO << "tunnel " << n << " up";
    std::uint64_t echoed = 0;
    while (!loop_.stop.load() && !pump.ended()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const std::uint64_t heard = pump.stats().rx_keepalives;
        for (; echoed < heard; ++echoed) pump.request_keepalive();
    }
    if (auto end = pump.ended()) LOG_INFO << "tunnel " << n << " ended: " << end->second;
    pump.stop();
    const datapath::TlsTunnelStats stats = pump.stats();
    write_stats(stats);
    std::string line;
    datapath::append_nonzero_text(line, stats);
    LOG_INFO << "tunnel " << n << " counters:" << line;
}

void Gateway::write_stats(const datapath::TlsTunnelStats& s) const {
    datapath::DatapathStats d;
    d.transport = datapath::Transport::https;
    d.https = s;
    write_json_file(o_.stats_json,
                    "{\"tunnels\": " + std::to_string(tunnels_.load()) + ", \"stats\": " + d.to_json() + "}");
}

int Gateway::run() {
    auto backend = io::SocketAddress::parse(o_.backend);
    if (!backend) {
        std::fprintf(stderr, "%s: --backend %s: %s\n", kProgram, o_.backend.c_str(), backend.error().message.c_str());
        return 2;
    }
    backend_host_ = io::numeric_host(reinterpret_cast<const sockaddr*>(&backend->storage));
    backend_port_ = backend->port();
    io::TlsClientConfig bc;
    bc.system_trust = false;
    bc.ca_file = o_.backend_ca;
    auto cred = io::TlsCredentials::load(bc);
    if (!cred) {
        std::fprintf(stderr, "%s: --backend-ca: %s\n", kProgram, cred.error().message.c_str());
        return 1;
    }
    backend_cred_ = *cred;
    return serve_until_stopped(o_.gw, [this](io::UniqueFd fd) { serve(std::move(fd)); });
}

}  // namespace
}  // namespace espvpn::tools

int main(int argc, char** argv) {
    using namespace espvpn::tools;
    return gateway_main<Gateway>(argc, argv, kProgram, parse, usage);
}
