// anyconnect-gateway: an AnyConnect gateway for benchmarks and tests, on the
// project's own datapath, so that the gateway is not what paces an AnyConnect
// row (ocserv's worker held a core there): CSTP on datapath::TlsPump (CSTP
// framing, tun offloads) and DTLS 1.2 PSK-NEGOTIATE on io::DtlsChannel's server
// end + datapath::DtlsDatapath (our record code, UDP GSO/GRO), one tun.
//
// The login is a fixed aggregate-auth dialogue (docs/protocols/anyconnect.md §2):
//   POST <config-auth type="init">       -> auth-request: username + password form
//   POST <config-auth type="auth-reply"> -> right credentials: complete, Set-Cookie
//                                           webvpn=<random>; wrong: the form again
//   CONNECT /CONNECT/mobile (that cookie) -> 200 CONNECTED, X-CSTP-* (address, split
//                                           routes, MTU, DPD) and, when the client
//                                           offered PSK-NEGOTIATE, X-DTLS-* (App-ID, port)
// then CSTP frames <-> the tun; the DTLS handshake is awaited beside it (the PSK
// exported from this CSTP session, as ocserv does); once it is done data goes
// over DTLS both ways. One tunnel at a time, one DTLS handshake per tunnel (no
// DTLS rekey), DPD and keepalives answered, never started. Counters of the last
// tunnel go to --stats-json when it ends.
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "protocols/base/hex.h"
#include "protocols/xml/document.h"
#include "src/datapath/dtls/dtls_datapath.h"
#include "src/datapath/tls/tls_pump.h"
#include "src/io/dtls_channel.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"
#include "tools/https-tunnel-gateway/gateway_support.h"

namespace espvpn::tools {
namespace {

constexpr const char* kProgram = "anyconnect-gateway";
constexpr std::size_t kMaxHead = 64 * 1024;
constexpr std::size_t kMaxBody = 1024 * 1024;

struct Options {
    // Certificate, tun (its routes: the clients' addresses; its MTU is X-CSTP-MTU and X-DTLS-MTU), listener, lifetime.
    GatewaySetup gw;  // its mtu: 1434 unless --mtu (parse)
    std::string dtls_listen;  // ADDR:PORT for DTLS; default: --listen's (as ocserv: one port, TCP + UDP)
    bool dtls = true;
    std::string dtls_priority = "NORMAL";  // GnuTLS priority the DTLS handshake starts from (DTLS + PSK forced)
    std::string user = "testuser", password = "test123";
    std::string client_ip = "10.200.0.2", client_ip6;  // X-CSTP-Address, X-CSTP-Address-IP6 (prefix)
    std::vector<std::string> split, split6;             // X-CSTP-Split-Include(-IP6)
    unsigned base_mtu = 1500;                           // X-CSTP-Base-MTU
    unsigned dpd = 30, keepalive = 20;
    int udp_buffer = 4 << 20;  // the DTLS socket's send and receive buffer (bytes)
    bool udp_offload = true;   // UDP GSO/GRO on the DTLS socket; off: one datagram per skb, as ocserv sends
    std::string stats_json;
};

void usage() {
    std::fprintf(stderr,
                 "usage: %s --cert FILE --key FILE [--listen ADDR:PORT (default 0.0.0.0:4443)]\n"
                 "  [--dtls-listen ADDR:PORT | --no-dtls] [--dtls-priority GNUTLS-PRIORITY] [--user NAME]\n"
                 "  [--password P] [--tun-name NAME] [--route PREFIX ...] [--client-ip A] [--client-ip6 A/LEN]\n"
                 "  [--split ADDR/MASK ...] [--split6 PREFIX ...] [--mtu N] [--base-mtu N] [--dpd S]\n"
                 "  [--udp-buffer BYTES] [--no-offload] [--no-udp-offload] [--stats-json FILE] [--seconds N]\n"
                 "SIGINT/SIGTERM stop.\n",
                 kProgram);
}

std::optional<Options> parse(int argc, char** argv) {
    Options o;
    o.gw.program = kProgram;
    o.gw.mtu = 1434;  // ocserv's data MTU for a 1500-byte base MTU
    auto own = [&o](const std::string& a, const OptionValue& value, bool& ok) {
        std::string v;
        if (a == "--dtls-listen") ok = value(o.dtls_listen);
        else if (a == "--no-dtls") o.dtls = false;
        else if (a == "--no-udp-offload") o.udp_offload = false;
        else if (a == "--dtls-priority") ok = value(o.dtls_priority);
        else if (a == "--user") ok = value(o.user);
        else if (a == "--password") ok = value(o.password);
        else if (a == "--client-ip") ok = value(o.client_ip);
        else if (a == "--client-ip6") ok = value(o.client_ip6);
        else if (a == "--stats-json") ok = value(o.stats_json);
        else if (a == "--split") { ok = value(v); o.split.push_back(v); }
        else if (a == "--split6") { ok = value(v); o.split6.push_back(v); }
        else if (a == "--base-mtu" || a == "--dpd" || a == "--udp-buffer") {
            const auto n = value(v) ? parse_count(v, a == "--udp-buffer" ? 1L << 30 : 1000000) : std::nullopt;
            ok = n.has_value();
            if (!ok) return true;
            if (a == "--base-mtu") o.base_mtu = static_cast<unsigned>(*n);
            else if (a == "--dpd") o.dpd = static_cast<unsigned>(*n);
            else o.udp_buffer = static_cast<int>(*n);
        } else return false;
        return true;
    };
    if (!parse_gateway_options(argc, argv, o.gw, usage, own)) return std::nullopt;
    if (o.gw.cert.empty() || o.gw.key.empty()) {
        std::fprintf(stderr, "%s: --cert and --key are required\n", kProgram);
        return std::nullopt;
    }
    if (o.dtls_listen.empty()) o.dtls_listen = o.gw.listen;
    return o;
}

std::string random_hex(std::size_t bytes) {
    std::vector<std::uint8_t> b(bytes);
    gnutls_rnd(GNUTLS_RND_NONCE, b.data(), b.size());
    return hex_encode(b);
}

std::string xml_reply(std::string_view body, std::string_view extra_headers = {}) {
    return "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nX-Transcend-Version: 1\r\n" + std::string(extra_headers) +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

constexpr std::string_view kXmlHead =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<config-auth client=\"vpn\" type=\"";

std::string login_form(std::string_view message) {
    return std::string(kXmlHead) + "auth-request\" aggregate-auth-version=\"2\">\n<auth id=\"main\"><message>" +
           std::string(message) +
           "</message>\n<form method=\"post\" action=\"/auth\">"
           "<input type=\"text\" name=\"username\" label=\"Username:\" />"
           "<input type=\"password\" name=\"password\" label=\"Password:\" /></form></auth></config-auth>\n";
}

// The DTLS side of a tunnel: once its handshake is done, what the CSTP pump's
// tx thread sends data through.
class DtlsCarrier : public datapath::PacketCarrier {
public:
    std::atomic<datapath::DtlsDatapath*> datapath{nullptr};
    bool carrying() const override { return datapath.load() != nullptr; }
    Status send(io::PacketBatch& batch) override { return datapath.load()->send(batch); }
};

class Gateway : TlsGateway {
public:
    explicit Gateway(Options o) : o_(std::move(o)) {}
    int run();

private:
    void serve(io::UniqueFd fd);
    // One request of the login; false: close the connection.
    bool answer(ServerTls& client, std::string_view head, std::string_view body);
    void connect_tunnel(ServerTls& client, std::string_view head, std::string_view early);
    void run_dtls(io::UdpSocket& udp, Secret psk, datapath::TlsPump& pump, DtlsCarrier& carrier,
                  std::unique_ptr<io::DtlsChannel>& channel, std::unique_ptr<datapath::DtlsDatapath>& dp,
                  const std::atomic<bool>& ending);
    std::string connect_reply(bool dtls, std::string_view app_id) const;
    void write_stats(const datapath::TlsTunnelStats& cstp, const datapath::DtlsDatapathStats* dtls) const;

    Options o_;
    std::mutex tunnel_mutex_;  // held while a tunnel runs: one at a time
    std::mutex cookies_mutex_;
    std::set<std::string> cookies_;  // webvpn cookies handed out
    std::atomic<unsigned> tunnels_{0};
};

bool Gateway::answer(ServerTls& client, std::string_view head, std::string_view body) {
    const std::string_view method = head.substr(0, head.find(' '));
    if (method != "POST")
        return client.write_all("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    auto doc = xml::Document::parse(body);
    const xml::Node root = doc && doc->root_name() == "config-auth" ? doc->root() : xml::Node();
    const std::string type = root.attribute("type").value_or("");
    if (type == "init") return client.write_all(xml_reply(login_form("Please enter your username and password.")));
    if (type == "logout")
        return client.write_all(xml_reply(std::string(kXmlHead) + "complete\" aggregate-auth-version=\"2\">"
                                          "<logout>ok</logout></config-auth>\n"));
    if (type != "auth-reply") {
        client.write_all("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
    }
    // The form's fields come back as elements of <auth> (Cisco's clients, openconnect, espvpn).
    const std::string user = root.child_text_or_empty("auth/username");
    if (user != o_.user || root.child_text_or_empty("auth/password") != o_.password) {
        LOG_INFO << "login refused for '" << user << "'";
        return client.write_all(xml_reply(login_form("Login failed.")));
    }
    const std::string cookie = random_hex(32);
    {
        std::lock_guard<std::mutex> l(cookies_mutex_);
        cookies_.insert(cookie);
    }
    LOG_INFO << "login of '" << o_.user << "'";
    return client.write_all(xml_reply(std::string(kXmlHead) +
                                          "complete\" aggregate-auth-version=\"2\">\n<auth id=\"success\">"
                                          "<message>Welcome.</message></auth></config-auth>\n",
                                      "Set-Cookie: webvpn=" + cookie + "; Secure\r\n"));
}

std::string Gateway::connect_reply(bool dtls, std::string_view app_id) const {
    std::string r = "HTTP/1.1 200 CONNECTED\r\nX-CSTP-Version: 1\r\nX-CSTP-Server-Name: espvpn anyconnect-gateway\r\n";
    auto h = [&r](std::string_view name, const std::string& value) {
        r.append(name).append(": ").append(value).append("\r\n");
    };
    h("X-CSTP-Address", o_.client_ip);
    h("X-CSTP-Netmask", "255.255.255.255");
    if (!o_.client_ip6.empty()) h("X-CSTP-Address-IP6", o_.client_ip6);
    for (const std::string& s : o_.split) h("X-CSTP-Split-Include", s);
    for (const std::string& s : o_.split6) h("X-CSTP-Split-Include-IP6", s);
    h("X-CSTP-DPD", std::to_string(o_.dpd));
    h("X-CSTP-Keepalive", std::to_string(o_.keepalive));
    h("X-CSTP-Idle-Timeout", "none");
    h("X-CSTP-Session-Timeout", "none");
    h("X-CSTP-Disconnected-Timeout", "none");
    h("X-CSTP-Keep", "true");
    h("X-CSTP-TCP-Keepalive", "true");
    h("X-CSTP-License", "accept");
    h("X-CSTP-Base-MTU", std::to_string(o_.base_mtu));
    h("X-CSTP-MTU", std::to_string(o_.gw.mtu));
    if (dtls) {
        h("X-DTLS-App-ID", std::string(app_id));
        h("X-DTLS-Port", std::to_string(io::SocketAddress::parse(o_.dtls_listen)->port()));  // checked by run()
        h("X-DTLS-DPD", std::to_string(o_.dpd));
        h("X-DTLS-Keepalive", std::to_string(o_.keepalive));
        h("X-DTLS-MTU", std::to_string(o_.gw.mtu));
        h("X-DTLS-CipherSuite", "PSK-NEGOTIATE");
    }
    return r + "\r\n";
}

void Gateway::serve(io::UniqueFd fd) {
    ServerTls client(server_cred_, std::move(fd));
    AcceptLoop::Tracked tracked(loop_, client.fd());
    if (!client.handshake()) return;
    std::string in;
    while (!loop_.stop.load()) {
        const std::size_t head_size = client.read_head(in, kMaxHead);
        if (head_size == 0) return;
        const std::string head = in.substr(0, head_size);
        if (head.starts_with("CONNECT ")) {
            in.erase(0, head_size);
            connect_tunnel(client, head, in);
            return;
        }
        const auto body = content_length(head, kMaxBody);
        if (!body) {
            client.write_all("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return;
        }
        while (in.size() < head_size + *body)
            if (!client.read_more(in)) return;
        const std::string request_body = in.substr(head_size, *body);
        in.erase(0, head_size + *body);
        if (!answer(client, head, request_body)) return;
    }
}

void Gateway::connect_tunnel(ServerTls& client, std::string_view head, std::string_view early) {
    const std::string cookies = header_value(head, "Cookie");
    const std::size_t at = cookies.find("webvpn=");
    const std::string cookie = at == std::string::npos ? "" : cookies.substr(at + 7, cookies.find(';', at) - at - 7);
    bool known;
    {
        std::lock_guard<std::mutex> l(cookies_mutex_);
        known = cookies_.count(cookie) > 0;
    }
    if (!known) {
        LOG_WARN << "CONNECT without a valid webvpn cookie: refused";
        client.write_all("HTTP/1.1 401 Unauthorized\r\nX-Reason: bad cookie\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    std::unique_lock<std::mutex> one(tunnel_mutex_, std::try_to_lock);
    if (!one.owns_lock()) {
        LOG_WARN << "a second tunnel while one runs: refused";
        client.write_all("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    const unsigned n = ++tunnels_;

    // DTLS when the client offers PSK-NEGOTIATE: the UDP socket listens before
    // the reply goes out, so the first ClientHello finds it.
    std::optional<io::UdpSocket> udp;
    Secret psk;
    if (o_.dtls && header_value(head, "X-DTLS-CipherSuite").find("PSK-NEGOTIATE") != std::string::npos) {
        io::UdpOptions u;
        u.local = o_.dtls_listen;
        u.send_buffer = u.receive_buffer = o_.udp_buffer;
        u.gso = u.gro = o_.udp_offload;
        auto s = io::UdpSocket::open(u);
        auto key = io::export_dtls_psk(client.native());
        if (s && key) {
            udp.emplace(std::move(*s));
            psk = std::move(*key);
        } else {
            LOG_WARN << "tunnel " << n << ": no DTLS: " << (s ? key.error().message : s.error().message);
        }
    }
    if (!client.write_all(connect_reply(udp.has_value(), random_hex(io::kDtlsSessionIdSize)))) return;

    datapath::TlsPump pump(client.native(), client.fd(), *tun_, datapath::cstp_framing(),
                           datapath::cstp_pump_options(static_cast<int>(o_.gw.mtu)));
    const auto* e = reinterpret_cast<const std::uint8_t*>(early.data());
    if (Status s = pump.start({e, early.size()}); !s) {
        LOG_WARN << "tunnel " << n << ": " << s.error().message;
        return;
    }
    LOG_INFO << "tunnel " << n << " up (CSTP" << (udp ? ", DTLS offered)" : ")");
    DtlsCarrier carrier;
    std::unique_ptr<io::DtlsChannel> channel;
    std::unique_ptr<datapath::DtlsDatapath> dp;
    std::atomic<bool> ending{false};
    std::thread dtls;
    if (udp)
        dtls = std::thread([&, key = std::move(psk)]() mutable {
            run_dtls(*udp, std::move(key), pump, carrier, channel, dp, ending);
        });
    while (!loop_.stop.load() && !pump.ended())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (auto end = pump.ended()) LOG_INFO << "tunnel " << n << " ended: " << end->second;
    ending = true;
    if (dtls.joinable()) dtls.join();
    pump.set_channel(nullptr);
    if (dp) dp->stop();
    pump.stop();
    const datapath::TlsTunnelStats cstp = pump.stats();
    std::optional<datapath::DtlsDatapathStats> dtls_stats;
    if (dp) dtls_stats = dp->stats();
    write_stats(cstp, dtls_stats ? &*dtls_stats : nullptr);
    LOG_INFO << "tunnel " << n << " counters: cstp rx " << cstp.rx_packets << " tx " << cstp.tx_packets
             << (dtls_stats ? ", dtls " + dtls_stats->to_json() : std::string(", no DTLS"));
}

// The DTLS handshake of one tunnel, off the CSTP threads: the first datagram's
// sender becomes the socket's peer; then data goes over DTLS until the tunnel ends.
void Gateway::run_dtls(io::UdpSocket& udp, Secret psk, datapath::TlsPump& pump, DtlsCarrier& carrier,
                       std::unique_ptr<io::DtlsChannel>& channel, std::unique_ptr<datapath::DtlsDatapath>& dp,
                       const std::atomic<bool>& ending) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!ending.load() && !udp.wait_readable(100))
        if (std::chrono::steady_clock::now() > deadline) {
            LOG_WARN << "DTLS: no ClientHello within 30 s; CSTP only";
            return;
        }
    if (ending.load()) return;
    io::SocketAddress from;
    from.length = sizeof from.storage;
    std::uint8_t peek;
    if (::recvfrom(udp.fd(), &peek, 1, MSG_PEEK, reinterpret_cast<sockaddr*>(&from.storage), &from.length) < 0 ||
        ::connect(udp.fd(), reinterpret_cast<const sockaddr*>(&from.storage), from.length) < 0) {
        LOG_WARN << "DTLS: the first datagram: " << std::strerror(errno);
        return;
    }
    udp.set_peer(from);
    io::DtlsChannelOptions co;
    co.mode = io::DtlsPskServerMode{std::move(psk), o_.dtls_priority};
    co.base_mtu = o_.base_mtu;
    co.ipv6_outer = from.family() == AF_INET6;
    auto ch = io::DtlsChannel::create(udp.fd(), std::move(co));
    if (!ch) {
        LOG_WARN << "DTLS: " << ch.error().message;
        return;
    }
    for (;;) {
        auto done = (*ch)->handshake_step();
        if (!done) {
            LOG_WARN << "DTLS handshake with " << from.to_string() << ": " << done.error().message;
            return;
        }
        if (*done) break;
        if (ending.load()) return;
        udp.wait_readable(std::min((*ch)->handshake_wait_ms(), 100));
    }
    channel = std::move(*ch);
    datapath::DtlsDatapathOptions d;
    d.deliver = [&pump](io::PacketBatch& batch) { pump.deliver(batch); };
    auto started = datapath::DtlsDatapath::start(&*tun_, udp, *channel, d);
    if (!started) {
        LOG_WARN << "DTLS datapath: " << started.error().message;
        return;
    }
    dp = std::move(*started);
    carrier.datapath = dp.get();
    pump.set_channel(&carrier);
    LOG_INFO << "DTLS up: " << channel->description() << " with " << from.to_string() << ", tunnel MTU "
             << channel->tunnel_mtu() << (channel->records_ours() ? ", records by espvpn" : ", records by GnuTLS");
    while (!ending.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (auto failed = dp->failure()) {
            LOG_WARN << "DTLS datapath stopped: " << *failed << "; CSTP only";
            pump.set_channel(nullptr);
            return;
        }
    }
}

void Gateway::write_stats(const datapath::TlsTunnelStats& cstp, const datapath::DtlsDatapathStats* dtls) const {
    std::string json = "{\"tunnels\": " + std::to_string(tunnels_.load()) + ", \"cstp\": {";
    datapath::append_json_members(json, cstp);
    json += "}, \"dtls\": " + (dtls ? dtls->to_json() : std::string("null")) + "}";
    write_json_file(o_.stats_json, json);
}

int Gateway::run() {
    if (o_.dtls) {
        if (auto a = io::SocketAddress::parse(o_.dtls_listen); !a) {
            std::fprintf(stderr, "%s: --dtls-listen %s: %s\n", kProgram, o_.dtls_listen.c_str(),
                         a.error().message.c_str());
            return 1;
        }
    }
    GatewaySetup& s = o_.gw;
    s.ready_extra = std::string("dtls=") + (o_.dtls ? o_.dtls_listen : "off");
    return serve_until_stopped(s, [this](io::UniqueFd fd) { serve(std::move(fd)); });
}

}  // namespace
}  // namespace espvpn::tools

int main(int argc, char** argv) {
    using namespace espvpn::tools;
    return gateway_main<Gateway>(argc, argv, kProgram, parse, usage);
}
