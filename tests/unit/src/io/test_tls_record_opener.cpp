// TlsRecordBatcher opening TLS application-data records itself (crypto/tls_record):
// a GnuTLS server seals, our opener (the client's batcher) opens, over a real
// GnuTLS session (certificate, not verified) for TLS 1.2 and 1.3 and each AEAD. The server's bytes are
// captured and written to a socketpair by the test, so records can be split at any
// byte, tampered with, or mixed with what GnuTLS must handle (alerts, a KeyUpdate,
// a HelloRequest, close_notify).
#include <doctest/doctest.h>

#include <gnutls/gnutls.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "src/io/tls_record_batcher.h"

using namespace espvpn;

namespace {

using Bytes = std::vector<std::uint8_t>;


struct Queue {
    gnutls_session_t session = nullptr;
    std::deque<std::uint8_t>* in = nullptr;
    std::deque<std::uint8_t>* out = nullptr;
};
ssize_t q_push(gnutls_transport_ptr_t p, const void* data, size_t n) {
    auto* q = static_cast<Queue*>(p);
    const auto* b = static_cast<const std::uint8_t*>(data);
    q->out->insert(q->out->end(), b, b + n);
    return static_cast<ssize_t>(n);
}
ssize_t q_pull(gnutls_transport_ptr_t p, void* data, size_t n) {
    auto* q = static_cast<Queue*>(p);
    if (q->in->empty()) {
        gnutls_transport_set_errno(q->session, EAGAIN);
        return -1;
    }
    const std::size_t k = std::min(n, q->in->size());
    std::copy_n(q->in->begin(), k, static_cast<std::uint8_t*>(data));
    q->in->erase(q->in->begin(), q->in->begin() + static_cast<std::ptrdiff_t>(k));
    return static_cast<ssize_t>(k);
}

// A handshaken PSK session pair in memory; then the client's transport is a socketpair
// end (for its batcher), and the server's output is collected in `to_client`.
struct Pair {
    std::deque<std::uint8_t> c2s, s2c;
    Queue cq, sq;
    gnutls_session_t client = nullptr, server = nullptr;
    gnutls_certificate_credentials_t ccred = nullptr, scred = nullptr;
    int fds[2] = {-1, -1};

    explicit Pair(const std::string& priority) {
        // The client does not verify: the test is about records, not about trust.
        REQUIRE(gnutls_certificate_allocate_credentials(&ccred) == 0);
        REQUIRE(gnutls_certificate_allocate_credentials(&scred) == 0);
        const std::string dir = ESPVPN_CERT_DIR;
        REQUIRE(gnutls_certificate_set_x509_key_file(scred, (dir + "/server.pem").c_str(),
                                                     (dir + "/server-key.pem").c_str(), GNUTLS_X509_FMT_PEM) >= 0);
        REQUIRE(gnutls_init(&client, GNUTLS_CLIENT | GNUTLS_NONBLOCK) == 0);
        REQUIRE(gnutls_init(&server, GNUTLS_SERVER | GNUTLS_NONBLOCK) == 0);
        REQUIRE(gnutls_credentials_set(client, GNUTLS_CRD_CERTIFICATE, ccred) == 0);
        REQUIRE(gnutls_credentials_set(server, GNUTLS_CRD_CERTIFICATE, scred) == 0);
        REQUIRE(gnutls_priority_set_direct(client, priority.c_str(), nullptr) == 0);
        REQUIRE(gnutls_priority_set_direct(server, priority.c_str(), nullptr) == 0);
        cq = {client, &s2c, &c2s};
        sq = {server, &c2s, &s2c};
        for (auto* q : {&cq, &sq}) {
            gnutls_transport_set_ptr(q->session, q);
            gnutls_transport_set_push_function(q->session, q_push);
            gnutls_transport_set_pull_function(q->session, q_pull);
        }
        int rc = GNUTLS_E_AGAIN, rs = GNUTLS_E_AGAIN;
        for (int i = 0; i < 100 && (rc != 0 || rs != 0); ++i) {
            if (rc != 0) rc = gnutls_handshake(client);
            if (rs != 0) rs = gnutls_handshake(server);
            REQUIRE_MESSAGE((rc == 0 || !gnutls_error_is_fatal(rc)), gnutls_strerror(rc));
            REQUIRE_MESSAGE((rs == 0 || !gnutls_error_is_fatal(rs)), gnutls_strerror(rs));
        }
        REQUIRE(rc == 0);
        REQUIRE(rs == 0);
        // TLS 1.3: the server's session tickets go to the client through GnuTLS first.
        settle();
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    }
    ~Pair() {
        gnutls_deinit(client);
        gnutls_deinit(server);
        gnutls_certificate_free_credentials(ccred);
        gnutls_certificate_free_credentials(scred);
        if (fds[0] >= 0) ::close(fds[0]);
        if (fds[1] >= 0) ::close(fds[1]);
    }
    void settle() {
        std::uint8_t buf[64];
        while (!s2c.empty()) {
            const ssize_t n = gnutls_record_recv(client, buf, sizeof buf);
            if (n == GNUTLS_E_AGAIN) break;
            REQUIRE(n == GNUTLS_E_AGAIN);
        }
    }
    // What the server sealed since the last call.
    Bytes take() {
        Bytes b(s2c.begin(), s2c.end());
        s2c.clear();
        return b;
    }
    void seal(const Bytes& payload) { REQUIRE(gnutls_record_send(server, payload.data(), payload.size()) == static_cast<ssize_t>(payload.size())); }
    void wire(const std::uint8_t* p, std::size_t n) {
        while (n > 0) {
            const ssize_t w = ::send(fds[1], p, n, 0);
            REQUIRE(w > 0);
            p += w;
            n -= static_cast<std::size_t>(w);
        }
    }
    void wire(const Bytes& b) { wire(b.data(), b.size()); }
};

Bytes payload(std::size_t n, std::uint8_t seed) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(seed + i * 7);
    return b;
}

// One record from the batcher, waiting out GNUTLS_E_AGAIN from what GnuTLS handled
// (a ticket, a KeyUpdate) while whole records wait.
ssize_t recv_one(io::TlsRecordBatcher& b, Bytes& out) {
    out.assign(io::TlsRecordBatcher::kDefaultInSize, 0);
    for (int i = 0; i < 8; ++i) {
        const ssize_t n = b.recv(out.data(), 16384 + 2048);
        if (n == GNUTLS_E_AGAIN && b.has_readahead()) continue;
        if (n > 0) out.resize(static_cast<std::size_t>(n));
        return n;
    }
    return GNUTLS_E_AGAIN;
}

struct Suite {
    std::string name;
    const char* priority;
    const char* owner;
};
const Suite kSuites[] = {
    {"TLS1.2 AES-128-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM", "espvpn (TLS1.2 AES-128-GCM)"},
    {"TLS1.2 AES-256-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM", "espvpn (TLS1.2 AES-256-GCM)"},
    {"TLS1.2 CHACHA20", "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+CHACHA20-POLY1305",
     "espvpn (TLS1.2 CHACHA20-POLY1305)"},
    {"TLS1.3 AES-128-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM", "espvpn (TLS1.3 AES-128-GCM)"},
    {"TLS1.3 AES-256-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-256-GCM", "espvpn (TLS1.3 AES-256-GCM)"},
    {"TLS1.3 CHACHA20", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305",
     "espvpn (TLS1.3 CHACHA20-POLY1305)"},
};

}  // namespace

TEST_CASE("TLS records: ours open what GnuTLS seals, for each version and AEAD; the rest stays in order") {
    for (const Suite& s : kSuites) {
        CAPTURE(s.name);
        Pair p(s.priority);
        io::TlsRecordBatcher batcher(p.client, p.fds[0]);
        batcher.open_records();
        Bytes got;
        const std::size_t sizes[] = {1, 20, 1400, 9000, 16384};
        for (std::size_t i = 0; i < 5; ++i) p.seal(payload(sizes[i], static_cast<std::uint8_t>(i)));
        p.wire(p.take());
        for (std::size_t i = 0; i < 5; ++i) {
            REQUIRE(recv_one(batcher, got) == static_cast<ssize_t>(sizes[i]));
            CHECK(got == payload(sizes[i], static_cast<std::uint8_t>(i)));
        }
        CHECK(batcher.records_ours());
        CHECK(batcher.records_owner() == s.owner);
        CHECK(recv_one(batcher, got) == GNUTLS_E_AGAIN);

        // close_notify after data: the end of the stream.
        p.seal(payload(50, 3));
        REQUIRE(gnutls_bye(p.server, GNUTLS_SHUT_WR) == 0);
        p.wire(p.take());
        REQUIRE(recv_one(batcher, got) == 50);
        CHECK(recv_one(batcher, got) == 0);
    }
}

TEST_CASE("TLS records: an alert between data records is GnuTLS's, in order") {
    for (const Suite& s : kSuites) {
        CAPTURE(s.name);
        Pair p(s.priority);
        io::TlsRecordBatcher batcher(p.client, p.fds[0]);
        batcher.open_records();
        Bytes got;
        p.seal(payload(100, 1));
        REQUIRE(gnutls_alert_send(p.server, GNUTLS_AL_WARNING, GNUTLS_A_USER_CANCELED) == 0);
        p.seal(payload(200, 2));
        p.wire(p.take());
        REQUIRE(recv_one(batcher, got) == 100);
        const ssize_t n = recv_one(batcher, got);
        CHECK(gnutls_alert_get(p.client) == GNUTLS_A_USER_CANCELED);
        if (s.name.rfind("TLS1.3", 0) == 0) {
            CHECK(n == GNUTLS_E_FATAL_ALERT_RECEIVED);  // GnuTLS's TLS 1.3 ends on any alert but close_notify
            continue;
        }
        // TLS 1.2: a warning; the data after it is ours again.
        CHECK(n == GNUTLS_E_WARNING_ALERT_RECEIVED);
        REQUIRE(recv_one(batcher, got) == 200);
        CHECK(got == payload(200, 2));
        CHECK(batcher.records_ours());
    }
}

TEST_CASE("TLS records: split at every byte across recv() calls") {
    for (const Suite& s : kSuites) {
        CAPTURE(s.name);
        Pair p(s.priority);
        io::TlsRecordBatcher batcher(p.client, p.fds[0]);
        batcher.open_records();
        p.seal(payload(30, 4));
        p.seal(payload(45, 5));
        const Bytes shape = p.take();  // the same sizes each round
        const std::size_t total = shape.size();
        p.wire(shape);
        Bytes got;
        REQUIRE(recv_one(batcher, got) == 30);
        REQUIRE(recv_one(batcher, got) == 45);
        for (std::size_t k = 1; k < total; ++k) {
            CAPTURE(k);
            p.seal(payload(30, static_cast<std::uint8_t>(k)));
            p.seal(payload(45, static_cast<std::uint8_t>(k + 1)));
            const Bytes w = p.take();
            REQUIRE(w.size() == total);
            std::vector<Bytes> seen;
            p.wire(w.data(), k);
            for (ssize_t n; (n = recv_one(batcher, got)) > 0;) seen.push_back(got);
            p.wire(w.data() + k, w.size() - k);
            for (ssize_t n; (n = recv_one(batcher, got)) > 0;) seen.push_back(got);
            REQUIRE(seen.size() == 2);
            CHECK(seen[0] == payload(30, static_cast<std::uint8_t>(k)));
            CHECK(seen[1] == payload(45, static_cast<std::uint8_t>(k + 1)));
        }
        CHECK(batcher.records_ours());
    }
}

TEST_CASE("TLS records: a tampered record goes to GnuTLS, which fails the session cleanly") {
    for (const Suite& s : kSuites) {
        CAPTURE(s.name);
        Pair p(s.priority);
        io::TlsRecordBatcher batcher(p.client, p.fds[0]);
        batcher.open_records();
        Bytes got;
        p.seal(payload(64, 6));
        p.wire(p.take());
        REQUIRE(recv_one(batcher, got) == 64);
        p.seal(payload(64, 7));
        Bytes w = p.take();
        w[w.size() - 20] ^= 0x01;
        p.wire(w);
        const ssize_t n = recv_one(batcher, got);
        CHECK(n < 0);
        CHECK(gnutls_error_is_fatal(static_cast<int>(n)));
    }
}

TEST_CASE("TLS 1.3 records: a KeyUpdate mid-stream is GnuTLS's, the data after it still ours") {
    for (const Suite& s : kSuites) {
        if (s.name.rfind("TLS1.3", 0) != 0) continue;
        CAPTURE(s.name);
        Pair p(s.priority);
        io::TlsRecordBatcher batcher(p.client, p.fds[0]);
        batcher.open_records();
        Bytes got;
        for (int round = 0; round < 3; ++round) {
            p.seal(payload(500, 8));
            REQUIRE(gnutls_session_key_update(p.server, round == 1 ? GNUTLS_KU_PEER : 0) == 0);
            p.seal(payload(700, 9));
            p.seal(payload(900, 10));
            p.wire(p.take());
            REQUIRE(recv_one(batcher, got) == 500);
            REQUIRE(recv_one(batcher, got) == 700);  // the KeyUpdate's EAGAIN waited out
            CHECK(got == payload(700, 9));
            REQUIRE(recv_one(batcher, got) == 900);
            CHECK(got == payload(900, 10));
            CHECK(batcher.records_ours());
        }
    }
}

TEST_CASE("TLS 1.2 records: a HelloRequest is GnuTLS's (REHANDSHAKE), the data after it still ours") {
    Pair p(kSuites[0].priority);
    io::TlsRecordBatcher batcher(p.client, p.fds[0]);
    batcher.open_records();
    Bytes got;
    p.seal(payload(10, 1));
    REQUIRE(gnutls_rehandshake(p.server) == 0);
    p.seal(payload(20, 2));
    p.wire(p.take());
    REQUIRE(recv_one(batcher, got) == 10);
    CHECK(recv_one(batcher, got) == GNUTLS_E_REHANDSHAKE);
    REQUIRE(recv_one(batcher, got) == 20);
    CHECK(got == payload(20, 2));
    CHECK(batcher.records_ours());
}

TEST_CASE("TLS records: a CBC session stays GnuTLS's") {
    Pair p("NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-CBC");
    io::TlsRecordBatcher batcher(p.client, p.fds[0]);
    batcher.open_records();
    Bytes got;
    p.seal(payload(300, 1));
    p.wire(p.take());
    REQUIRE(recv_one(batcher, got) == 300);
    CHECK(got == payload(300, 1));
    CHECK_FALSE(batcher.records_ours());
    CHECK(batcher.records_owner().rfind("GnuTLS (", 0) == 0);
}
