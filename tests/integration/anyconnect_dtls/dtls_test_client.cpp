// Test client for the AnyConnect DTLS channel: the project's TlsStream,
// export_dtls_psk, DtlsChannel and DtlsDatapath against dtls-test-server.
//
//   dtls-test-client --ca FILE --tls-port P --udp-port U --mode psk|legacy
//                    [--legacy-cipher NAME] [--dtls12-header] --tun NAME
//                    --address A/N --seconds S [--handshake-timeout MS]
//                    [--stop-file PATH]   (stop early once PATH exists)
//
// With --ocserv HOST:PORT --cookie-file F (the webvpn cookie from
// `openconnect --authenticate`) it talks to a real ocserv instead: a bare
// CONNECT /CSCOSSLC/tunnel offering PSK-NEGOTIATE (--mode psk) or the legacy
// suites (--mode legacy: both headers; --mode legacy-cbc: only AES256-SHA and
// AES128-SHA, i.e. DTLS 0.9), whose X-DTLS-*/X-CSTP-* answer drives the channel
// and the tun address (a test harness, not the product's CSTP code: it never
// reads the CSTP stream after the headers).
//
// Otherwise: the mini CONNECT of dtls_test_server.cpp, the DTLS handshake, then
// a tun with the tunnel MTU (read by a thread of this client, as the CSTP pump
// reads it in the product) and the DTLS datapath for S seconds; sends one DPD
// request and one keepalive; prints "TUNNEL UP", then "STATS <json>" and a
// "RESULT ..." line, and exits 0 when DPD worked both ways. A failed handshake
// prints "HANDSHAKE FAILED <message> after <ms>" and exits 3.
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bitset>
#include <chrono>
#include <fstream>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "protocols/base/hex.h"
#include "protocols/tunnel/dpd_timer.h"
#include "src/datapath/dtls/dtls_datapath.h"
#include "src/io/dtls_channel.h"
#include "src/io/tls_stream.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"

using namespace espvpn;
using Clock = std::chrono::steady_clock;

namespace {
[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "dtls-test-client: %s\n", what.c_str());
    std::exit(2);
}

template <class T>
T must(Result<T> r, const char* what) {
    if (!r) die(std::string(what) + ": " + r.error().message);
    return std::move(r.value());
}
void must(Status s, const char* what) {
    if (!s) die(std::string(what) + ": " + s.error().message);
}

// X-DTLS-App-ID / X-DTLS-Session-ID: 64 hex digits (espvpn parses them with the CONNECT reply).
std::vector<std::uint8_t> session_id(std::string_view hex, const char* what) {
    auto bytes = Secret::from_hex(hex);
    if (!bytes || bytes->size() != io::kDtlsSessionIdSize) die(std::string(what) + " is not 64 hex digits");
    return {bytes->reveal().begin(), bytes->reveal().end()};
}

std::string read_line(io::TlsStream& tls) {
    std::string line;
    std::uint8_t c;
    while (line.size() < 512) {
        std::size_t n = must(tls.read_some({&c, 1}), "TLS read");
        if (n == 0) die("server closed the TLS connection");
        if (c == '\n') return line;
        line += static_cast<char>(c);
    }
    die("reply line too long");
}

// The CONNECT response headers, name -> value (first occurrence), up to the blank line.
std::map<std::string, std::string> read_connect_reply(io::TlsStream& tls) {
    std::map<std::string, std::string> headers;
    std::string status = read_line(tls);
    if (status.rfind("HTTP/1.1 200 ", 0) != 0) die("CONNECT refused: " + status);
    for (int i = 0; i < 200; ++i) {
        std::string line = read_line(tls);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) return headers;
        const auto colon = line.find(": ");
        if (colon != std::string::npos) headers.emplace(line.substr(0, colon), line.substr(colon + 2));
    }
    die("CONNECT reply has too many headers");
}

std::string header(const std::map<std::string, std::string>& h, const std::string& name) {
    auto it = h.find(name);
    if (it == h.end()) die("CONNECT reply lacks " + name);
    return it->second;
}

std::string token_after(const std::string& line, const std::string& key) {
    std::istringstream in(line);
    std::string word;
    while (in >> word)
        if (word == key && in >> word) return word;
    die("no " + key + " in '" + line + "'");
}
}  // namespace

int main(int argc, char** argv) {
    std::string ocserv, cookie_file, stop_file;
    std::string ca, mode = "psk", legacy_cipher = "OC-DTLS1_2-AES256-GCM", tun_name, address;
    int tls_port = 0, udp_port = 0, seconds = 3, handshake_timeout_ms = 8000;
    bool dtls12_header = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + a);
            return argv[++i];
        };
        if (a == "--ca") ca = next();
        else if (a == "--tls-port") tls_port = std::stoi(next());
        else if (a == "--udp-port") udp_port = std::stoi(next());
        else if (a == "--mode") mode = next();
        else if (a == "--legacy-cipher") legacy_cipher = next();
        else if (a == "--dtls12-header") dtls12_header = true;
        else if (a == "--tun") tun_name = next();
        else if (a == "--address") address = next();
        else if (a == "--seconds") seconds = std::stoi(next());
        else if (a == "--ocserv") ocserv = next();
        else if (a == "--cookie-file") cookie_file = next();
        else if (a == "--stop-file") stop_file = next();
        else if (a == "--handshake-timeout") handshake_timeout_ms = std::stoi(next());
        else die("unknown option " + a);
    }
    if (ca.empty() || tun_name.empty() || (ocserv.empty() && (!tls_port || !udp_port || address.empty())))
        die("missing options");

    io::TlsClientConfig tc;
    tc.system_trust = false;
    tc.ca_file = ca;
    tc.priority = "NORMAL:-VERS-ALL:+VERS-TLS1.2";  // like CSTP against ocserv (no TLS 1.3)
    auto creds = must(io::TlsCredentials::load(tc), "TLS credentials");
    std::string host = "127.0.0.1";
    if (!ocserv.empty()) {
        host = ocserv.substr(0, ocserv.find(':'));
        tls_port = std::stoi(ocserv.substr(ocserv.find(':') + 1));
    }
    auto tls = must(io::TlsStream::connect(host, static_cast<std::uint16_t>(tls_port), creds), "TLS connect");

    io::DtlsChannelOptions options;
    Secret master;
    if (!ocserv.empty()) {
        std::ifstream cf(cookie_file);
        std::string cookie;
        std::getline(cf, cookie);
        if (cookie.empty()) die("empty cookie file " + cookie_file);
        master = must(io::make_dtls_master_secret(), "master secret");
        const bool psk_mode = mode == "psk";
        std::string req = "CONNECT /CSCOSSLC/tunnel HTTP/1.1\r\nHost: " + ocserv +
                          "\r\nUser-Agent: Open AnyConnect VPN Agent v9.01\r\nCookie: webvpn=" + cookie +
                          "\r\nX-CSTP-Version: 1\r\nX-CSTP-Hostname: dtlstest\r\nX-CSTP-Base-MTU: 1500\r\n"
                          "X-CSTP-MTU: 1400\r\nX-CSTP-Address-Type: IPv4\r\nX-DTLS-Master-Secret: " +
                          hex_encode(master.reveal()) + "\r\nX-DTLS-CipherSuite: " +
                          (psk_mode ? "PSK-NEGOTIATE:" + io::dtls_legacy_suite_offer(false)
                           : mode == "legacy-cbc" ? std::string("AES256-SHA:AES128-SHA")
                                                  : io::dtls_legacy_suite_offer(false)) +
                          (mode == "legacy-cbc" ? std::string()
                                                : "\r\nX-DTLS12-CipherSuite: " + io::dtls_legacy_suite_offer(true)) +
                          "\r\n\r\n";
        must(tls->write_all({reinterpret_cast<const std::uint8_t*>(req.data()), req.size()}), "CONNECT");
        const auto h = read_connect_reply(*tls);
        udp_port = std::stoi(header(h, "X-DTLS-Port"));
        options.base_mtu = std::stoul(header(h, "X-CSTP-Base-MTU"));
        in_addr mask{};
        if (::inet_pton(AF_INET, header(h, "X-CSTP-Netmask").c_str(), &mask) != 1) die("bad X-CSTP-Netmask");
        address = header(h, "X-CSTP-Address") + "/" + std::to_string(std::bitset<32>(ntohl(mask.s_addr)).count());
        const bool dtls12 = h.count("X-DTLS12-CipherSuite") != 0;  // it replaces X-DTLS-CipherSuite
        const std::string cipher = header(h, dtls12 ? "X-DTLS12-CipherSuite" : "X-DTLS-CipherSuite");
        std::printf("CONNECTED cipher=%s%s address=%s\n", dtls12 ? "(DTLS12 header) " : "", cipher.c_str(),
                    address.c_str());
        if (psk_mode) {
            if (cipher != "PSK-NEGOTIATE") die("server did not choose PSK-NEGOTIATE");
            io::DtlsPskMode psk;
            psk.psk = must(io::export_dtls_psk(*tls), "PSK export");
            psk.app_id = session_id(header(h, "X-DTLS-App-ID"), "X-DTLS-App-ID");
            options.mode = std::move(psk);
        } else {
            io::DtlsLegacyMode legacy;
            legacy.master_secret = master.clone();
            legacy.session_id = session_id(header(h, "X-DTLS-Session-ID"), "X-DTLS-Session-ID");
            legacy.suite = must(io::find_dtls_legacy_suite(cipher, dtls12), "cipher");
            legacy.tunnel_mtu = std::stoul(header(h, "X-DTLS-MTU"));
            options.mode = std::move(legacy);
        }
    } else if (mode == "psk") {
        const std::string req = "PSK\n";
        must(tls->write_all({reinterpret_cast<const std::uint8_t*>(req.data()), req.size()}), "TLS write");
        const std::string reply = read_line(*tls);
        io::DtlsPskMode psk;
        psk.psk = must(io::export_dtls_psk(*tls), "PSK export");
        psk.app_id = session_id(token_after(reply, "APPID"), "X-DTLS-App-ID");
        options.base_mtu = std::stoul(token_after(reply, "BASEMTU"));
        options.mode = std::move(psk);
    } else if (mode == "legacy") {
        master = must(io::make_dtls_master_secret(), "master secret");
        const std::string req = "LEGACY " + hex_encode(master.reveal()) + "\n";
        must(tls->write_all({reinterpret_cast<const std::uint8_t*>(req.data()), req.size()}), "TLS write");
        const std::string reply = read_line(*tls);
        io::DtlsLegacyMode legacy;
        legacy.master_secret = master.clone();
        legacy.session_id = session_id(token_after(reply, "SESSION"), "X-DTLS-Session-ID");
        legacy.suite = must(io::find_dtls_legacy_suite(token_after(reply, "CIPHER"), dtls12_header), "cipher");
        legacy.tunnel_mtu = std::stoul(token_after(reply, "MTU"));
        options.mode = std::move(legacy);
    } else {
        die("--mode must be psk or legacy");
    }

    io::UdpOptions uo;
    uo.remote = host + ":" + std::to_string(udp_port);
    io::UdpSocket udp = must(io::UdpSocket::open(uo), "UDP socket");
    options.retransmit = std::chrono::milliseconds(500);
    options.handshake_timeout = std::chrono::milliseconds(handshake_timeout_ms);
    auto channel = must(io::DtlsChannel::create(udp.fd(), std::move(options)), "DTLS channel");
    const Clock::time_point t0 = Clock::now();
    const Status handshake = channel->handshake();
    const auto handshake_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (!handshake) {
        std::printf("HANDSHAKE FAILED %s after %lld ms\n", handshake.error().message.c_str(),
                    static_cast<long long>(handshake_ms));
        tls->close();
        return 3;
    }
    std::printf("DTLS %s resumed=%d tunnel_mtu=%zu handshake_ms=%lld\n", channel->description().c_str(),
                channel->resumed(), channel->tunnel_mtu(), static_cast<long long>(handshake_ms));

    io::TunOptions to;
    to.name = tun_name;
    io::TunDevice tun = must(io::TunDevice::open(to), "tun");
    must(tun.set_mtu(static_cast<unsigned>(channel->tunnel_mtu())), "tun MTU");
    must(tun.set_up(true), "tun up");
    must(tun.add_address(must(io::InterfaceAddress::parse(address), "address")), "tun address");
    // The tun's reader and writer are this client's (in the product: the CSTP pump).
    datapath::DtlsDatapathOptions dopt;
    dopt.deliver = [&tun](io::PacketBatch& batch) { (void)tun.write_packets(batch); };
    auto dp = must(datapath::DtlsDatapath::start(&tun, udp, *channel, dopt), "DTLS datapath");
    std::atomic<bool> reading{true};
    std::thread tun_reader([&] {
        io::PacketBatch batch(io::PacketBatchShape{128, std::max<std::size_t>(channel->tunnel_mtu(), 1500), 16, 0});
        while (reading) {
            if (!tun.wait_readable(50)) continue;
            batch.clear();
            if (auto got = tun.read_packets(batch); got && *got) (void)dp->send(batch);
        }
    });
    std::printf("TUNNEL UP %s mtu=%zu\n", tun.name().c_str(), channel->tunnel_mtu());
    std::fflush(stdout);

    // DPD as the session would run it: one request now, then by the timer.
    DpdTimer dpd({std::chrono::seconds(1), std::chrono::seconds(1)}, Clock::now());
    dp->send_dpd_request();
    dp->send_keepalive();
    const Clock::time_point end = Clock::now() + std::chrono::seconds(seconds);
    bool dead = false;
    while (Clock::now() < end && !dp->failure() && (stop_file.empty() || ::access(stop_file.c_str(), F_OK) != 0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const datapath::DtlsLiveness l = dp->liveness();
        if (l.last_rx.time_since_epoch().count()) dpd.on_receive(l.last_rx);
        switch (dpd.poll(Clock::now())) {
            case DpdAction::send_dpd_request: dp->send_dpd_request(); break;
            case DpdAction::send_keepalive: dp->send_keepalive(); break;
            case DpdAction::peer_dead: dead = true; break;
            case DpdAction::none: break;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // last answers in flight
    const datapath::DtlsDatapathStats s = dp->stats();
    const datapath::DtlsLiveness l = dp->liveness();
    const std::optional<std::string> failure = dp->failure();
    reading = false;
    tun_reader.join();
    dp->stop();
    tls->close();  // tells the server to report
    std::printf("STATS %s\n", s.to_json().c_str());
    const bool dpd_ok = l.last_dpd_response.time_since_epoch().count() != 0;
    // ocserv sends no DPD request of its own in a short run; the test server always does.
    const bool answered = !ocserv.empty() || (s.tx.dpd_responses_sent >= 1 && s.rx.dpd_requests >= 1);
    std::printf("RESULT dpd_response_received=%d server_dpd_answered=%d peer_dead=%d failure=%s drops=%llu\n", dpd_ok,
                answered, dead, failure ? failure->c_str() : "none", static_cast<unsigned long long>(s.drops()));
    return dpd_ok && answered && !dead && !failure ? 0 : 1;
}
