// Test client for the AnyConnect DTLS channel: the project's TlsStream,
// export_dtls_psk, DtlsChannel and DtlsDatapath against dtls-test-server.
//
//   dtls-test-client --ca FILE --tls-port P --udp-port U --mode psk|legacy
//                    [--legacy-cipher NAME] [--dtls12-header] --tun NAME
//                    --address A/N --seconds S [--handshake-timeout MS]
//
// Runs the mini CONNECT (see dtls_test_server.cpp), the DTLS handshake, then
// a tun with the tunnel MTU and the DTLS datapath for S seconds; sends one DPD
// request and one keepalive; prints "TUNNEL UP", then "STATS <json>" and a
// "RESULT ..." line, and exits 0 when DPD worked both ways. A failed handshake
// prints "HANDSHAKE FAILED <message> after <ms>" and exits 3.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "protocols/anyconnect/dtls_dpd.h"
#include "src/datapath/dtls_datapath.h"
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

std::string token_after(const std::string& line, const std::string& key) {
    std::istringstream in(line);
    std::string word;
    while (in >> word)
        if (word == key && in >> word) return word;
    die("no " + key + " in '" + line + "'");
}
}  // namespace

int main(int argc, char** argv) {
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
        else if (a == "--handshake-timeout") handshake_timeout_ms = std::stoi(next());
        else die("unknown option " + a);
    }
    if (ca.empty() || !tls_port || !udp_port || tun_name.empty() || address.empty()) die("missing options");

    io::TlsClientConfig tc;
    tc.system_trust = false;
    tc.ca_file = ca;
    tc.priority = "NORMAL:-VERS-ALL:+VERS-TLS1.2";  // like CSTP against ocserv (no TLS 1.3)
    auto creds = must(io::TlsCredentials::load(tc), "TLS credentials");
    auto tls = must(io::TlsStream::connect("127.0.0.1", static_cast<std::uint16_t>(tls_port), creds), "TLS connect");

    io::DtlsChannelOptions options;
    Secret master;
    if (mode == "psk") {
        const std::string req = "PSK\n";
        must(tls->write_all({reinterpret_cast<const std::uint8_t*>(req.data()), req.size()}), "TLS write");
        const std::string reply = read_line(*tls);
        io::DtlsPskMode psk;
        psk.psk = must(io::export_dtls_psk(*tls), "PSK export");
        psk.app_id = must(io::parse_dtls_session_id(token_after(reply, "APPID"), "X-DTLS-App-ID"), "App-ID");
        options.base_mtu = std::stoul(token_after(reply, "BASEMTU"));
        options.mode = std::move(psk);
    } else if (mode == "legacy") {
        master = must(io::make_dtls_master_secret(), "master secret");
        const std::string req = "LEGACY " + io::hex_encode(master.reveal()) + "\n";
        must(tls->write_all({reinterpret_cast<const std::uint8_t*>(req.data()), req.size()}), "TLS write");
        const std::string reply = read_line(*tls);
        io::DtlsLegacyMode legacy;
        legacy.master_secret = master.clone();
        legacy.session_id = must(io::parse_dtls_session_id(token_after(reply, "SESSION"), "X-DTLS-Session-ID"), "Session-ID");
        legacy.suite = must(io::find_dtls_legacy_suite(token_after(reply, "CIPHER"), dtls12_header), "cipher");
        legacy.tunnel_mtu = std::stoul(token_after(reply, "MTU"));
        options.mode = std::move(legacy);
    } else {
        die("--mode must be psk or legacy");
    }

    io::UdpOptions uo;
    uo.remote = "127.0.0.1:" + std::to_string(udp_port);
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
    must(tun.add_address(must(io::InterfaceAddress::parse(address), "address")), "tun address");
    must(tun.set_up(true), "tun up");
    auto dp = must(datapath::DtlsDatapath::start(tun, udp, *channel, {}), "DTLS datapath");
    std::printf("TUNNEL UP %s mtu=%zu\n", tun.name().c_str(), channel->tunnel_mtu());
    std::fflush(stdout);

    // DPD as the session would run it: one request now, then by the timer.
    anyconnect::DpdTimer dpd({std::chrono::seconds(1), std::chrono::seconds(1)}, Clock::now());
    dp->send_dpd_request();
    dp->send_keepalive();
    const Clock::time_point end = Clock::now() + std::chrono::seconds(seconds);
    bool dead = false;
    while (Clock::now() < end && !dp->failure()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const datapath::DtlsLiveness l = dp->liveness();
        if (l.last_rx.time_since_epoch().count()) dpd.on_receive(l.last_rx);
        switch (dpd.poll(Clock::now())) {
            case anyconnect::DpdAction::send_dpd_request: dp->send_dpd_request(); break;
            case anyconnect::DpdAction::send_keepalive: dp->send_keepalive(); break;
            case anyconnect::DpdAction::peer_dead: dead = true; break;
            case anyconnect::DpdAction::none: break;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // last answers in flight
    const datapath::DtlsDatapathStats s = dp->stats();
    const datapath::DtlsLiveness l = dp->liveness();
    const std::optional<std::string> failure = dp->failure();
    dp->stop();
    tls->close();  // tells the server to report
    std::printf("STATS %s\n", s.to_json().c_str());
    const bool dpd_ok = l.last_dpd_response.time_since_epoch().count() != 0;
    const bool answered = s.tx.dpd_responses_sent >= 1 && s.rx.dpd_requests >= 1;
    std::printf("RESULT dpd_response_received=%d server_dpd_answered=%d peer_dead=%d failure=%s drops=%llu\n", dpd_ok,
                answered, dead, failure ? failure->c_str() : "none", static_cast<unsigned long long>(s.drops()));
    return dpd_ok && answered && !dead && !failure ? 0 : 1;
}
