// DtlsRecordSealer / DtlsRecordOpener against real GnuTLS DTLS 1.2 sessions: a PSK
// client and server handshake over two in-memory datagram queues, then records go
// between ours and GnuTLS's in both directions for each AEAD, plus forgeries,
// replays, reordering, other epochs/types and malformed datagrams.
#include <doctest/doctest.h>

#include <gnutls/dtls.h>
#include <gnutls/gnutls.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "crypto/dtls_record.h"
#include "protocols/base/byte_order.h"

using namespace espvpn;

namespace {

using Bytes = std::vector<std::uint8_t>;

const unsigned char kPsk[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

int server_psk(gnutls_session_t, const char*, gnutls_datum_t* key) {
    key->data = static_cast<unsigned char*>(gnutls_malloc(sizeof kPsk));
    std::memcpy(key->data, kPsk, sizeof kPsk);
    key->size = sizeof kPsk;
    return 0;
}

// One side of the link: reads `in`, writes `out`. Everything it pushes is also kept
// in `sent` so a test can look at (and replay) GnuTLS's own datagrams.
struct End {
    gnutls_session_t session = nullptr;
    std::deque<Bytes>* in = nullptr;
    std::deque<Bytes>* out = nullptr;
    std::vector<Bytes> sent;
};

ssize_t push(gnutls_transport_ptr_t p, const void* data, size_t size) {
    auto* e = static_cast<End*>(p);
    const auto* b = static_cast<const std::uint8_t*>(data);
    e->out->emplace_back(b, b + size);
    e->sent.emplace_back(b, b + size);
    return static_cast<ssize_t>(size);
}
ssize_t pull(gnutls_transport_ptr_t p, void* data, size_t size) {
    auto* e = static_cast<End*>(p);
    if (e->in->empty()) {
        gnutls_transport_set_errno(e->session, EAGAIN);
        return -1;
    }
    Bytes d = std::move(e->in->front());
    e->in->pop_front();
    const std::size_t n = std::min(size, d.size());
    std::memcpy(data, d.data(), n);
    return static_cast<ssize_t>(n);
}
int pull_timeout(gnutls_transport_ptr_t p, unsigned) { return static_cast<End*>(p)->in->empty() ? 0 : 1; }

struct Link {
    std::deque<Bytes> to_server, to_client;
    End client, server;
    gnutls_psk_client_credentials_t ccred = nullptr;
    gnutls_psk_server_credentials_t scred = nullptr;

    explicit Link(const std::string& priority) {
        REQUIRE(gnutls_psk_allocate_client_credentials(&ccred) == 0);
        const gnutls_datum_t key{const_cast<unsigned char*>(kPsk), sizeof kPsk};
        REQUIRE(gnutls_psk_set_client_credentials(ccred, "psk", &key, GNUTLS_PSK_KEY_RAW) == 0);
        REQUIRE(gnutls_psk_allocate_server_credentials(&scred) == 0);
        gnutls_psk_set_server_credentials_function(scred, server_psk);
        REQUIRE(gnutls_init(&client.session, GNUTLS_CLIENT | GNUTLS_DATAGRAM | GNUTLS_NONBLOCK) == 0);
        REQUIRE(gnutls_init(&server.session, GNUTLS_SERVER | GNUTLS_DATAGRAM | GNUTLS_NONBLOCK) == 0);
        REQUIRE(gnutls_credentials_set(client.session, GNUTLS_CRD_PSK, ccred) == 0);
        REQUIRE(gnutls_credentials_set(server.session, GNUTLS_CRD_PSK, scred) == 0);
        client.in = &to_client;
        client.out = &to_server;
        server.in = &to_server;
        server.out = &to_client;
        for (End* e : {&client, &server}) {
            REQUIRE(gnutls_priority_set_direct(e->session, priority.c_str(), nullptr) == 0);
            gnutls_transport_set_ptr(e->session, e);
            gnutls_transport_set_push_function(e->session, push);
            gnutls_transport_set_pull_function(e->session, pull);
            gnutls_transport_set_pull_timeout_function(e->session, pull_timeout);
            gnutls_dtls_set_mtu(e->session, 1400);
        }
    }
    ~Link() {
        gnutls_deinit(client.session);
        gnutls_deinit(server.session);
        gnutls_psk_free_client_credentials(ccred);
        gnutls_psk_free_server_credentials(scred);
    }
    void handshake() {
        bool c_done = false, s_done = false;
        for (int i = 0; i < 200 && !(c_done && s_done); ++i) {
            for (auto [e, done] : {std::pair{&client, &c_done}, std::pair{&server, &s_done}}) {
                if (*done) continue;
                const int rc = gnutls_handshake(e->session);
                if (rc == 0) *done = true;
                else REQUIRE_MESSAGE(rc == GNUTLS_E_AGAIN, gnutls_strerror(rc));
            }
        }
        REQUIRE(c_done);
        REQUIRE(s_done);
        client.sent.clear();
        server.sent.clear();
    }
};

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes seal(DtlsRecordSealer& s, const Bytes& plain) {
    Bytes out(plain.size() + s.overhead());
    const std::size_t n = s.seal(plain, out);
    REQUIRE(n == out.size());
    return out;
}

// Opens with ours; the status, and the plaintext when ok.
std::pair<DtlsOpenStatus, Bytes> open(DtlsRecordOpener& o, const Bytes& datagram) {
    Bytes out(datagram.size());
    const DtlsRecordOpened r = o.open(datagram, out);
    out.resize(r.status == DtlsOpenStatus::ok ? r.length : 0);
    return {r.status, out};
}

// gnutls_record_recv of the next queued datagram.
Bytes gnutls_receive(End& e) {
    Bytes buf(2048);
    const ssize_t n = gnutls_record_recv(e.session, buf.data(), buf.size());
    REQUIRE_MESSAGE(n >= 0, gnutls_strerror(static_cast<int>(n)));
    buf.resize(static_cast<std::size_t>(n));
    return buf;
}

std::uint64_t record_seq(const Bytes& d) { return load_be64(d.data() + 3) & kDtlsMaxSeq; }

}  // namespace

TEST_CASE("DTLS records: ours and GnuTLS's interoperate, for each AEAD") {
    const char* base = "NORMAL:-VERS-ALL:+VERS-DTLS1.2:-KX-ALL:+PSK:-CIPHER-ALL:+";
    for (const char* cipher : {"AES-128-GCM", "AES-256-GCM", "CHACHA20-POLY1305"}) {
        CAPTURE(cipher);
        Link link(std::string(base) + cipher);
        link.handshake();
        REQUIRE(std::string(gnutls_cipher_get_name(gnutls_cipher_get(link.client.session))) == cipher);
        auto server_opener = DtlsRecordOpener::from_gnutls(link.server.session);
        auto client_opener = DtlsRecordOpener::from_gnutls(link.client.session);
        REQUIRE(server_opener);
        REQUIRE(client_opener);
        CHECK(server_opener->epoch() == 1);
        CHECK(client_opener->epoch() == 1);

        // GnuTLS sends, ours opens (client -> server).
        for (const char* m : {"c0", "c1"}) {
            REQUIRE(gnutls_record_send(link.client.session, m, 2) == 2);
            Bytes d = link.to_server.back();
            link.to_server.pop_back();
            CHECK(open(*server_opener, d) == std::pair{DtlsOpenStatus::ok, text(m)});
        }
        // Ours takes over the client's sending where GnuTLS left off.
        const std::uint64_t gnutls_last = record_seq(link.client.sent.back());
        auto sealer = DtlsRecordSealer::from_gnutls(link.client.session);
        REQUIRE(sealer);
        CHECK(sealer->epoch() == 1);
        CHECK(sealer->next_seq() == gnutls_last + 1);
        for (int i = 2; i < 6; ++i) {
            const Bytes plain = text("client record " + std::to_string(i) + std::string(100 * i, 'x'));
            Bytes rec = seal(*sealer, plain);
            CHECK(record_seq(rec) == gnutls_last + i - 1);
            // GnuTLS's receiver takes it, and so does ours.
            link.to_server.push_back(rec);
            CHECK(gnutls_receive(link.server) == plain);
            CHECK(open(*server_opener, rec) == std::pair{DtlsOpenStatus::ok, plain});
        }

        // Server -> client: GnuTLS sends, ours opens; a real warning alert is not ours
        // and GnuTLS reads it.
        REQUIRE(gnutls_record_send(link.server.session, "s0", 2) == 2);
        CHECK(open(*client_opener, link.to_client.back()) == std::pair{DtlsOpenStatus::ok, text("s0")});
        link.to_client.clear();
        REQUIRE(gnutls_alert_send(link.server.session, GNUTLS_AL_WARNING, GNUTLS_A_USER_CANCELED) == 0);
        const Bytes alert = link.to_client.back();
        CHECK(alert[0] == 21);
        CHECK(open(*client_opener, alert).first == DtlsOpenStatus::not_ours);
        Bytes buf(64);
        CHECK(gnutls_record_recv(link.client.session, buf.data(), buf.size()) == GNUTLS_E_WARNING_ALERT_RECEIVED);
        link.to_client.clear();

        // Ours seals on the server, continuing after GnuTLS's alert; ours opens.
        auto server_sealer = DtlsRecordSealer::from_gnutls(link.server.session);
        REQUIRE(server_sealer);
        CHECK(server_sealer->next_seq() == record_seq(alert) + 1);
        std::vector<Bytes> recs;
        for (int i = 0; i < 5; ++i) recs.push_back(seal(*server_sealer, text("s" + std::to_string(i + 1))));
        // Reordered inside the window: all accepted.
        for (int i : {2, 0, 4, 1}) CHECK(open(*client_opener, recs[i]) == std::pair{DtlsOpenStatus::ok, text("s" + std::to_string(i + 1))});
        // Replayed: refused, GnuTLS's own datagram included.
        CHECK(open(*client_opener, recs[2]).first == DtlsOpenStatus::replayed);
        CHECK(open(*client_opener, link.server.sent.front()).first == DtlsOpenStatus::replayed);  // "s0"

        // A flipped bit anywhere the AEAD covers is refused, and does not burn the sequence number.
        const Bytes good = recs[3];
        // (0x80 at byte 8 moves the header's seq far ahead, so it is not a replay.)
        for (std::size_t at : {std::size_t{8}, std::size_t{13}, good.size() / 2, good.size() - 1}) {
            CAPTURE(at);
            Bytes bad = good;
            bad[at] ^= 0x80;
            CHECK(open(*client_opener, bad).first == DtlsOpenStatus::bad_tag);
        }
        CHECK(open(*client_opener, good) == std::pair{DtlsOpenStatus::ok, text("s4")});

        // Not ours: another epoch, another type, another version, two records in one datagram.
        const Bytes next = seal(*server_sealer, text("s6"));
        Bytes other = next;
        other[4] = 2;  // epoch 2
        CHECK(open(*client_opener, other).first == DtlsOpenStatus::not_ours);
        other = next;
        other[0] = 21;
        CHECK(open(*client_opener, other).first == DtlsOpenStatus::not_ours);
        other = next;
        other[2] = 0xff;  // DTLS 1.0
        CHECK(open(*client_opener, other).first == DtlsOpenStatus::not_ours);
        other = next;
        other.insert(other.end(), next.begin(), next.end());
        CHECK(open(*client_opener, other).first == DtlsOpenStatus::not_ours);
        // Malformed: short datagram, length field not the datagram's, body too short, no room.
        CHECK(open(*client_opener, Bytes(next.begin(), next.begin() + 12)).first == DtlsOpenStatus::not_ours);
        other = Bytes(next.begin(), next.end() - 1);
        CHECK(open(*client_opener, other).first == DtlsOpenStatus::not_ours);
        other = Bytes(next.begin(), next.begin() + 13 + 10);
        store_be16(other.data() + 11, 10);
        CHECK(open(*client_opener, other).first == DtlsOpenStatus::bad_length);
        Bytes small(1);
        CHECK(client_opener->open(next, small).status == DtlsOpenStatus::bad_length);
        // And GnuTLS opens what ours sealed on the server.
        link.to_client.push_back(next);
        CHECK(gnutls_receive(link.client) == text("s6"));
        CHECK(open(*client_opener, next) == std::pair{DtlsOpenStatus::ok, text("s6")});
    }
}

TEST_CASE("DTLS records: the replay window refuses what fell behind it") {
    Link link("NORMAL:-VERS-ALL:+VERS-DTLS1.2:-KX-ALL:+PSK:-CIPHER-ALL:+AES-128-GCM");
    link.handshake();
    auto sealer = DtlsRecordSealer::from_gnutls(link.client.session);
    auto opener = DtlsRecordOpener::from_gnutls(link.server.session);
    REQUIRE(sealer);
    REQUIRE(opener);
    const Bytes first = seal(*sealer, text("first"));
    Bytes last;
    for (std::uint32_t i = 0; i < ReplayWindow::kWindowSize + 10; ++i) last = seal(*sealer, text("x"));
    CHECK(open(*opener, last).first == DtlsOpenStatus::ok);
    CHECK(open(*opener, first).first == DtlsOpenStatus::replayed);
}

TEST_CASE("DTLS records: the sealer stops before the last sequence number") {
    DtlsRecordState st;
    st.aead = DtlsAead::aes128_gcm;
    st.epoch = 1;
    st.seq = kDtlsMaxSeq - 2;
    auto sealer = DtlsRecordSealer::create(st);
    REQUIRE(sealer);
    Bytes out(64);
    const Bytes plain = text("p");
    CHECK(sealer->seal(plain, out) == 1 + sealer->overhead());
    CHECK(sealer->seal(plain, out) == 1 + sealer->overhead());
    CHECK(sealer->next_seq() == kDtlsMaxSeq);
    CHECK(sealer->seal(plain, out) == 0);
    CHECK(sealer->next_seq() == kDtlsMaxSeq);
    // Too small an output, or too large a plaintext: refused, seq unchanged.
    st.seq = 5;
    auto fresh = DtlsRecordSealer::create(st);
    REQUIRE(fresh);
    Bytes tiny(1 + fresh->overhead() - 1);
    CHECK(fresh->seal(plain, tiny) == 0);
    Bytes huge(16385), room(16385 + fresh->overhead());
    CHECK(fresh->seal(huge, room) == 0);
    CHECK(fresh->next_seq() == 5);
}

TEST_CASE("DTLS records: a CBC session stays GnuTLS's") {
    Link link("NORMAL:-VERS-ALL:+VERS-DTLS1.2:-KX-ALL:+PSK:-CIPHER-ALL:+AES-128-CBC:-MAC-ALL:+SHA1");
    link.handshake();
    CHECK_FALSE(DtlsRecordSealer::from_gnutls(link.client.session));
    CHECK_FALSE(DtlsRecordOpener::from_gnutls(link.client.session));
}
