// Test peer for the AnyConnect DTLS channel: a small ocserv stand-in written
// directly on GnuTLS (no project code), so client and server cannot share a
// mistake in the project's DTLS code.
//
//   dtls-test-server --certs DIR --tls-port P --udp-port U [--drop-first-hello]
//                    [--legacy-cipher NAME] [--seconds N]
//                    [--wrong-psk | --full-handshake | --no-dtls]
//
// 1. TLS on 127.0.0.1:P (certs/server.pem). The client sends one line:
//      "PSK"                        -> "APPID <64 hex> BASEMTU 1500"
//      "LEGACY <master 96 hex>"     -> "SESSION <64 hex> CIPHER <name> MTU 1400"
//    (a mini CONNECT). In PSK mode the DTLS key is the RFC 5705 export of
//    this TLS session with label EXPORTER-openconnect-psk, as ocserv does.
// 2. DTLS on 127.0.0.1:U. The ClientHello's session_id must be the App-ID
//    (PSK) or the Session-ID (legacy), its random not all zero. With
//    --drop-first-hello the first ClientHello is thrown away and the
//    retransmission must come from the same source port.
// 3. After the handshake: one DPD request to the client (its answer must echo
//    the payload), then every data packet is sent back with IP source and
//    destination swapped, DPD requests answered, keepalives counted.
// Refusal cases: --wrong-psk derives the PSK with another label, --full-handshake
// answers a legacy client with a full handshake instead of the resumption
// (what a man in the middle without the master secret would have to do),
// --no-dtls never reads the UDP socket (a black hole).
// 4. When the client closes the TLS connection (or after --seconds), prints
//    one "RESULT key=value ..." line and exits 0 if every check held.
#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/dtls.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "dtls-test-server: %s\n", what.c_str());
    std::exit(2);
}

void check(int rc, const char* what) {
    if (rc < 0) die(std::string(what) + ": " + gnutls_strerror(rc));
}

std::string hex(const unsigned char* p, std::size_t n) {
    std::string s;
    char b[3];
    for (std::size_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", p[i]);
        s += b;
    }
    return s;
}

std::vector<unsigned char> unhex(const std::string& s) {
    std::vector<unsigned char> out;
    for (std::size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(std::stoi(s.substr(i, 2), nullptr, 16));
    return out;
}

struct LegacySuite {
    const char* name;
    gnutls_protocol_t version;
    gnutls_cipher_algorithm_t cipher;
    gnutls_mac_algorithm_t mac;
    const char* priority;
};
// ocserv 1.1.6's table (subset), with its workaround flags.
const LegacySuite kSuites[] = {
    {"OC-DTLS1_2-AES256-GCM", GNUTLS_DTLS1_2, GNUTLS_CIPHER_AES_256_GCM, GNUTLS_MAC_AEAD,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-256-GCM:+AEAD:+RSA:+SIGN-ALL:%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION"},
    {"OC-DTLS1_2-AES128-GCM", GNUTLS_DTLS1_2, GNUTLS_CIPHER_AES_128_GCM, GNUTLS_MAC_AEAD,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-128-GCM:+AEAD:+RSA:+SIGN-ALL:%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION"},
    {"AES256-SHA", GNUTLS_DTLS0_9, GNUTLS_CIPHER_AES_256_CBC, GNUTLS_MAC_SHA1,
     "NONE:+VERS-DTLS0.9:+COMP-NULL:+AES-256-CBC:+SHA1:+RSA:%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION"},
    {"AES128-SHA", GNUTLS_DTLS0_9, GNUTLS_CIPHER_AES_128_CBC, GNUTLS_MAC_SHA1,
     "NONE:+VERS-DTLS0.9:+COMP-NULL:+AES-128-CBC:+SHA1:+RSA:%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION"},
};

int listen_on(int type, int port) {
    int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind: " + std::string(std::strerror(errno)));
    if (type == SOCK_STREAM) ::listen(fd, 1);
    return fd;
}

std::string read_line(gnutls_session_t s) {
    std::string line;
    char c;
    while (line.size() < 512) {
        ssize_t n = gnutls_record_recv(s, &c, 1);
        if (n <= 0) die("TLS read of the request line failed");
        if (c == '\n') return line;
        line += c;
    }
    die("request line too long");
}

std::vector<unsigned char> g_psk;
int psk_for(gnutls_session_t, const char* username, gnutls_datum_t* key) {
    if (std::strcmp(username, "psk") != 0) return -1;  // OC and ocserv use this fixed identity
    key->data = static_cast<unsigned char*>(gnutls_malloc(g_psk.size()));
    std::memcpy(key->data, g_psk.data(), g_psk.size());
    key->size = static_cast<unsigned>(g_psk.size());
    return 0;
}

// ClientHello session_id (DTLS record 13 + handshake header 12 + version 2 + random 32).
bool hello_session_id(const unsigned char* d, std::size_t n, std::vector<unsigned char>& id, bool& zero_random) {
    if (n < 60 || d[0] != 22 || d[13] != 1) return false;
    zero_random = true;
    for (std::size_t i = 27; i < 59; ++i) zero_random &= d[i] == 0;
    const std::size_t len = d[59];
    if (60 + len > n) return false;
    id.assign(d + 60, d + 60 + len);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    std::string certs, legacy_cipher = "OC-DTLS1_2-AES256-GCM";
    int tls_port = 0, udp_port = 0, seconds = 30;
    bool drop_first = false, wrong_psk = false, full_handshake = false, no_dtls = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + a);
            return argv[++i];
        };
        if (a == "--certs") certs = next();
        else if (a == "--tls-port") tls_port = std::stoi(next());
        else if (a == "--udp-port") udp_port = std::stoi(next());
        else if (a == "--legacy-cipher") legacy_cipher = next();
        else if (a == "--seconds") seconds = std::stoi(next());
        else if (a == "--drop-first-hello") drop_first = true;
        else if (a == "--wrong-psk") wrong_psk = true;
        else if (a == "--full-handshake") full_handshake = true;
        else if (a == "--no-dtls") no_dtls = true;
        else die("unknown option " + a);
    }
    if (certs.empty() || !tls_port || !udp_port) die("usage: --certs DIR --tls-port P --udp-port U");
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(seconds);
    int failures = 0;
    auto expect = [&](bool ok, const std::string& what) {
        if (!ok) {
            std::printf("FAIL %s\n", what.c_str());
            ++failures;
        }
    };

    gnutls_certificate_credentials_t xcred;
    check(gnutls_certificate_allocate_credentials(&xcred), "credentials");
    check(gnutls_certificate_set_x509_key_file(xcred, (certs + "/server.pem").c_str(),
                                               (certs + "/server-key.pem").c_str(), GNUTLS_X509_FMT_PEM),
          "server certificate");

    // 1. The TLS "CSTP" connection.
    const int lfd = listen_on(SOCK_STREAM, tls_port);
    const int ufd = listen_on(SOCK_DGRAM, udp_port);
    std::printf("READY\n");
    std::fflush(stdout);
    pollfd lp{lfd, POLLIN, 0};
    if (::poll(&lp, 1, seconds * 1000) != 1) die("no TLS client");
    const int tfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    gnutls_session_t tls;
    check(gnutls_init(&tls, GNUTLS_SERVER), "TLS init");
    check(gnutls_priority_set_direct(tls, "NORMAL:-VERS-TLS1.3", nullptr), "TLS priority");
    check(gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, xcred), "TLS credentials");
    gnutls_transport_set_int(tls, tfd);
    gnutls_handshake_set_timeout(tls, 10000);
    check(gnutls_handshake(tls), "TLS handshake");

    const std::string request = read_line(tls);
    const bool legacy = request.rfind("LEGACY ", 0) == 0;
    if (!legacy && request != "PSK") die("bad request line '" + request + "'");
    std::vector<unsigned char> expected_id(32);
    check(gnutls_rnd(GNUTLS_RND_NONCE, expected_id.data(), expected_id.size()), "random id");
    std::string reply;
    const LegacySuite* suite = nullptr;
    std::vector<unsigned char> master;
    if (legacy) {
        master = unhex(request.substr(7));
        if (master.size() != 48) die("master secret must be 96 hex digits");
        for (const LegacySuite& s : kSuites)
            if (legacy_cipher == s.name) suite = &s;
        if (!suite) die("unknown --legacy-cipher " + legacy_cipher);
        reply = "SESSION " + hex(expected_id.data(), 32) + " CIPHER " + suite->name + " MTU 1400\n";
    } else {
        g_psk.resize(32);
        const char* label = wrong_psk ? "EXPORTER-openconnect-pskX" : "EXPORTER-openconnect-psk";
        check(gnutls_prf_rfc5705(tls, std::strlen(label), label, 0, nullptr, g_psk.size(),
                                 reinterpret_cast<char*>(g_psk.data())),
              "PSK export");
        reply = "APPID " + hex(expected_id.data(), 32) + " BASEMTU 1500\n";
    }
    check(static_cast<int>(gnutls_record_send(tls, reply.data(), reply.size())), "TLS reply");

    if (no_dtls) {  // wait for the client to give up and close
        pollfd p{tfd, POLLIN, 0};
        char c;
        while (::poll(&p, 1, 200) >= 0 && Clock::now() < deadline)
            if (p.revents && gnutls_record_recv(tls, &c, 1) <= 0) break;
        std::printf("RESULT mode=no-dtls\n");
        return 0;
    }

    // 2. The ClientHello(s).
    unsigned char buf[65536];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    auto wait_udp = [&](int ms) {
        pollfd p{ufd, POLLIN, 0};
        return ::poll(&p, 1, ms) == 1;
    };
    if (!wait_udp(10000)) die("no ClientHello");
    ssize_t n = ::recvfrom(ufd, buf, sizeof buf, MSG_PEEK, reinterpret_cast<sockaddr*>(&from), &from_len);
    std::vector<unsigned char> id;
    bool zero_random = false;
    expect(n > 0 && hello_session_id(buf, static_cast<std::size_t>(n), id, zero_random), "first datagram is a ClientHello");
    expect(id == expected_id, "ClientHello session_id is the " + std::string(legacy ? "Session-ID" : "App-ID") +
                                  " (got " + hex(id.data(), id.size()) + ")");
    expect(!zero_random, "ClientHello random is not all zero");
    long retransmit_ms = -1;
    bool same_port = true;
    if (drop_first) {
        const sockaddr_in first = *reinterpret_cast<sockaddr_in*>(&from);
        (void)::recv(ufd, buf, sizeof buf, 0);  // thrown away, as if lost
        const Clock::time_point dropped = Clock::now();
        if (!wait_udp(10000)) die("no retransmitted ClientHello within 10 s");
        from_len = sizeof from;
        n = ::recvfrom(ufd, buf, sizeof buf, MSG_PEEK, reinterpret_cast<sockaddr*>(&from), &from_len);
        retransmit_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - dropped).count();
        same_port = reinterpret_cast<sockaddr_in*>(&from)->sin_port == first.sin_port;
        expect(same_port, "the retransmitted ClientHello comes from the same socket (source port)");
        expect(n > 0 && hello_session_id(buf, static_cast<std::size_t>(n), id, zero_random) && id == expected_id,
               "the retransmission is the same ClientHello");
    }
    // Like ocserv's worker: a socket "connected" to the client from now on.
    if (::connect(ufd, reinterpret_cast<sockaddr*>(&from), from_len) != 0) die("UDP connect");

    gnutls_session_t dtls;
    gnutls_psk_server_credentials_t pcred = nullptr;
    check(gnutls_init(&dtls, GNUTLS_SERVER | GNUTLS_DATAGRAM), "DTLS init");
    if (legacy) {
        check(gnutls_priority_set_direct(dtls, suite->priority, nullptr), "DTLS legacy priority");
        const gnutls_datum_t m{master.data(), 48}, sid{expected_id.data(), 32};
        if (!full_handshake)
            check(gnutls_session_set_premaster(dtls, GNUTLS_SERVER, suite->version, GNUTLS_KX_RSA, suite->cipher,
                                               suite->mac, GNUTLS_COMP_NULL, &m, &sid),
                  "DTLS premaster");
        check(gnutls_credentials_set(dtls, GNUTLS_CRD_CERTIFICATE, xcred), "DTLS credentials");
    } else {
        check(gnutls_priority_set_direct(dtls, "NORMAL:-VERS-ALL:-KX-ALL:+PSK:+VERS-DTLS-ALL", nullptr),
              "DTLS PSK priority");
        check(gnutls_psk_allocate_server_credentials(&pcred), "PSK credentials");
        gnutls_psk_set_server_credentials_function(pcred, psk_for);
        check(gnutls_credentials_set(dtls, GNUTLS_CRD_PSK, pcred), "DTLS credentials");
    }
    gnutls_transport_set_int(dtls, ufd);
    gnutls_dtls_set_mtu(dtls, 1500 - 28);
    gnutls_dtls_set_timeouts(dtls, 400, 10000);
    int rc;
    do {
        rc = gnutls_handshake(dtls);
    } while (rc < 0 && !gnutls_error_is_fatal(rc));
    check(rc, "DTLS handshake");
    char* desc = gnutls_session_get_desc(dtls);
    std::printf("DTLS %s resumed=%d\n", desc, gnutls_session_is_resumed(dtls));
    std::fflush(stdout);
    gnutls_free(desc);
    if (legacy) expect(gnutls_session_is_resumed(dtls), "legacy handshake was a resumption");

    // 3. Traffic.
    static const unsigned char kPing[] = {0x03, 's', 'r', 'v', 'p', 'i', 'n', 'g'};
    check(static_cast<int>(gnutls_record_send(dtls, kPing, sizeof kPing)), "DPD request");
    std::uint64_t data = 0, dpd_requests = 0, keepalives = 0, bad = 0;
    bool ping_answered = false;
    bool client_closed = false;
    while (Clock::now() < deadline) {
        pollfd p[2] = {{ufd, POLLIN, 0}, {tfd, POLLIN, 0}};
        if (gnutls_record_check_pending(dtls) == 0 && ::poll(p, 2, 200) <= 0) continue;
        if (p[1].revents) {
            char c;
            if (gnutls_record_recv(tls, &c, 1) <= 0) {
                client_closed = true;
                break;
            }
        }
        if (!(p[0].revents & POLLIN) && gnutls_record_check_pending(dtls) == 0) continue;
        const ssize_t got = gnutls_record_recv(dtls, buf, sizeof buf);
        if (got == GNUTLS_E_AGAIN || got == GNUTLS_E_INTERRUPTED) continue;
        if (got <= 0) {
            if (gnutls_error_is_fatal(static_cast<int>(got))) die("DTLS receive: " + std::string(gnutls_strerror(static_cast<int>(got))));
            continue;
        }
        switch (buf[0]) {
            case 0x00: {
                const unsigned version = got > 1 ? buf[1] >> 4 : 0;
                unsigned char* ip = buf + 1;
                const std::size_t off = version == 4 ? 12 : 8, len = version == 4 ? 4 : 16;
                if ((version != 4 && version != 6) || static_cast<std::size_t>(got) < 1 + off + 2 * len) {
                    ++bad;
                    break;
                }
                unsigned char tmp[16];
                std::memcpy(tmp, ip + off, len);
                std::memmove(ip + off, ip + off + len, len);
                std::memcpy(ip + off + len, tmp, len);
                ++data;
                if (gnutls_record_send(dtls, buf, static_cast<std::size_t>(got)) < 0) ++bad;
                break;
            }
            case 0x03:
                ++dpd_requests;
                buf[0] = 0x04;  // ocserv flips the type and returns the packet unchanged
                if (gnutls_record_send(dtls, buf, static_cast<std::size_t>(got)) < 0) ++bad;
                break;
            case 0x04:
                if (static_cast<std::size_t>(got) == sizeof kPing && std::memcmp(buf + 1, kPing + 1, sizeof kPing - 1) == 0)
                    ping_answered = true;
                else
                    ++bad;
                break;
            case 0x07: ++keepalives; break;
            default: ++bad;
        }
    }
    expect(client_closed, "client closed the TLS connection before --seconds ran out");
    expect(ping_answered, "client answered the server's DPD request with the same payload");
    expect(bad == 0, "no malformed records");
    std::printf("RESULT mode=%s data=%llu dpd_requests=%llu keepalives=%llu ping_answered=%d retransmit_ms=%ld "
                "same_port=%d failures=%d\n",
                legacy ? "legacy" : "psk", static_cast<unsigned long long>(data),
                static_cast<unsigned long long>(dpd_requests), static_cast<unsigned long long>(keepalives),
                ping_answered, retransmit_ms, same_port, failures);
    gnutls_deinit(dtls);
    gnutls_bye(tls, GNUTLS_SHUT_WR);
    gnutls_deinit(tls);
    if (pcred) gnutls_psk_free_server_credentials(pcred);
    gnutls_certificate_free_credentials(xcred);
    return failures ? 1 : 0;
}
