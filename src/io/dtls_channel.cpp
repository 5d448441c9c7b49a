#include "src/io/dtls_channel.h"

#include <gnutls/crypto.h>
#include <gnutls/dtls.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "protocols/base/hex.h"
#include "protocols/anyconnect/dtls_framing.h"
#include "protocols/anyconnect/tunnel_mtu.h"
#include "src/io/tls_stream.h"

namespace espvpn::io {

namespace {

// Ciphers OC's GnuTLS build offers and ocserv 1.1.6 accepts (docs 4.3). The
// priority strings pin version, kx, cipher and MAC, and keep the extended
// master secret and renegotiation-info extensions out of the fake resumption.
constexpr const char* kNoExtensions = ":%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION";
const DtlsLegacySuite kLegacySuites[] = {
    {"OC-DTLS1_2-AES256-GCM", false, GNUTLS_DTLS1_2, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_256_GCM, GNUTLS_MAC_AEAD,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-256-GCM:+AEAD:+RSA:+SIGN-ALL"},
    {"OC-DTLS1_2-AES128-GCM", false, GNUTLS_DTLS1_2, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_128_GCM, GNUTLS_MAC_AEAD,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-128-GCM:+AEAD:+RSA:+SIGN-ALL"},
    {"AES256-SHA", false, GNUTLS_DTLS0_9, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_256_CBC, GNUTLS_MAC_SHA1,
     "NONE:+VERS-DTLS0.9:+COMP-NULL:+AES-256-CBC:+SHA1:+RSA:+SIGN-ALL"},
    {"AES128-SHA", false, GNUTLS_DTLS0_9, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_128_CBC, GNUTLS_MAC_SHA1,
     "NONE:+VERS-DTLS0.9:+COMP-NULL:+AES-128-CBC:+SHA1:+RSA:+SIGN-ALL"},
    {"AES256-GCM-SHA384", true, GNUTLS_DTLS1_2, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_256_GCM, GNUTLS_MAC_AEAD,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-256-GCM:+AEAD:+RSA:+SIGN-ALL"},
    {"AES128-GCM-SHA256", true, GNUTLS_DTLS1_2, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_128_GCM, GNUTLS_MAC_AEAD,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-128-GCM:+AEAD:+RSA:+SIGN-ALL"},
    {"AES256-SHA", true, GNUTLS_DTLS1_2, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_256_CBC, GNUTLS_MAC_SHA1,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-256-CBC:+SHA1:+RSA:+SIGN-ALL"},
    {"AES128-SHA", true, GNUTLS_DTLS1_2, GNUTLS_KX_RSA, GNUTLS_CIPHER_AES_128_CBC, GNUTLS_MAC_SHA1,
     "NONE:+VERS-DTLS1.2:+COMP-NULL:+AES-128-CBC:+SHA1:+RSA:+SIGN-ALL"},
};

// The batch a seal_batch/open_batch call on this thread works on. The GnuTLS
// transport callbacks use it instead of the socket, so a batch call makes no
// syscall; other calls (handshake, send_record) go to the socket.
struct RecordSink {
    PacketBatch* out;
};
struct DatagramSource {
    const PacketBatch* in;
    std::size_t* next;
    std::size_t end;  // GnuTLS may read datagrams [*next, end)
};
thread_local RecordSink* t_sink = nullptr;
thread_local DatagramSource* t_source = nullptr;

std::string gnutls_message(const char* what, int code) {
    return std::string(what) + ": " + gnutls_strerror(code);
}

// Our sealer starts this far past GnuTLS's write sequence number. GnuTLS can
// still send a record of the epoch on its own: its last handshake flight again
// when the server repeats its own (the client ends a resumption, and GnuTLS
// answers from inside gnutls_record_recv on the rx thread). With the gap its
// numbers and ours never meet, so no AEAD nonce is used twice, and no thread has
// to tell the other what it sent. Peers accept a forward jump (RFC 6347 4.1.2.6).
constexpr std::uint64_t kSealerSeqGap = std::uint64_t{1} << 16;

}  // namespace

Result<Secret> export_dtls_psk(gnutls_session_t cstp_session) {
    if (!cstp_session) return make_error("DTLS PSK: no CSTP TLS session to export it from");
    Secret psk(kDtlsPskSize);
    // No context at all (not an empty one): ocserv derives it the same way.
    const int rc = gnutls_prf_rfc5705(cstp_session, kDtlsPskLabel.size(), kDtlsPskLabel.data(), 0, nullptr,
                                      psk.size(), reinterpret_cast<char*>(psk.reveal_mutable().data()));
    if (rc < 0) return make_error(gnutls_message("DTLS PSK export from the CSTP session failed", rc));
    return psk;
}

Result<Secret> export_dtls_psk(const TlsStream& cstp) { return export_dtls_psk(cstp.native()); }

Result<const DtlsLegacySuite*> find_dtls_legacy_suite(std::string_view name, bool dtls12_header) {
    for (const DtlsLegacySuite& s : kLegacySuites)
        if (s.dtls12_header == dtls12_header && name == s.name) return &s;
    return make_error("unknown DTLS cipher suite '" + std::string(name) + "' in " +
                      (dtls12_header ? "X-DTLS12-CipherSuite" : "X-DTLS-CipherSuite"));
}

std::string dtls_legacy_suite_offer(bool dtls12_header) {
    std::string list;
    for (const DtlsLegacySuite& s : kLegacySuites) {
        if (s.dtls12_header != dtls12_header) continue;
        if (!list.empty()) list += ':';
        list += s.name;
    }
    return list;
}

Result<Secret> make_dtls_master_secret() {
    Secret s(kDtlsMasterSecretSize);
    const int rc = gnutls_rnd(GNUTLS_RND_KEY, s.reveal_mutable().data(), s.size());
    if (rc < 0) return make_error(gnutls_message("random DTLS master secret", rc));
    return s;
}

Result<std::unique_ptr<DtlsChannel>> DtlsChannel::create(int udp_fd, DtlsChannelOptions options) {
    if (udp_fd < 0) return make_error("DTLS: no UDP socket");
    std::unique_ptr<DtlsChannel> ch(new DtlsChannel());
    ch->fd_ = udp_fd;
    if (Status s = ch->configure(options); !s) return s.error();
    return ch;
}

DtlsChannel::~DtlsChannel() {
    if (session_) gnutls_deinit(session_);
    if (psk_cred_) gnutls_psk_free_client_credentials(psk_cred_);
    if (psk_server_cred_) gnutls_psk_free_server_credentials(psk_server_cred_);
}

Status DtlsChannel::configure(DtlsChannelOptions& options) {
    // No extensions, like OC: the legacy mode's fake resumption must not carry
    // any, and ocserv's PSK mode expects none.
    auto* server = std::get_if<DtlsPskServerMode>(&options.mode);
    int rc = gnutls_init(&session_, (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_DATAGRAM | GNUTLS_NONBLOCK |
                                        GNUTLS_NO_EXTENSIONS);
    if (rc < 0) return make_error(gnutls_message("DTLS session", rc));
    base_mtu_ = options.base_mtu;
    ipv6_outer_ = options.ipv6_outer;
    client_ = server == nullptr;
    first_resend_ = resend_after_ = std::max(options.retransmit, std::chrono::milliseconds(1));

    // PSK-NEGOTIATE at either end: a 32-byte key, DTLS only, PSK key exchange only.
    auto psk_priority = [this](const Secret& key, const std::string& base) -> Status {
        if (key.size() != kDtlsPskSize)
            return make_error("DTLS PSK must be " + std::to_string(kDtlsPskSize) + " bytes, got " +
                              std::to_string(key.size()));
        const std::string prio = base + ":-VERS-TLS-ALL:+VERS-DTLS-ALL:-KX-ALL:+PSK";
        const char* where = nullptr;
        if (int r = gnutls_priority_set_direct(session_, prio.c_str(), &where); r < 0)
            return make_error(
                gnutls_message(("DTLS priority '" + prio + "' at '" + (where ? where : "") + "'").c_str(), r));
        return {};
    };

    if (server) {
        if (Status st = psk_priority(server->psk, server->base_priority); !st) return st;
        server_psk_ = std::move(server->psk);
        gnutls_session_set_ptr(session_, this);
        if ((rc = gnutls_psk_allocate_server_credentials(&psk_server_cred_)) < 0)
            return make_error(gnutls_message("DTLS PSK credentials", rc));
        gnutls_psk_set_server_credentials_function(psk_server_cred_, &DtlsChannel::server_psk);
        if ((rc = gnutls_credentials_set(session_, GNUTLS_CRD_PSK, psk_server_cred_)) < 0)
            return make_error(gnutls_message("DTLS PSK credentials", rc));
    } else if (auto* psk = std::get_if<DtlsPskMode>(&options.mode)) {
        if (Status st = psk_priority(psk->psk, psk->base_priority); !st) return st;
        if (psk->app_id.empty() || psk->app_id.size() > kDtlsSessionIdSize)
            return make_error("DTLS App-ID must be 1.." + std::to_string(kDtlsSessionIdSize) + " bytes, got " +
                              std::to_string(psk->app_id.size()));
        // ocserv's main process routes the ClientHello to the session's worker by this id.
        const gnutls_datum_t id{psk->app_id.data(), static_cast<unsigned>(psk->app_id.size())};
        if ((rc = gnutls_session_set_id(session_, &id)) < 0) return make_error(gnutls_message("DTLS App-ID", rc));
        if ((rc = gnutls_psk_allocate_client_credentials(&psk_cred_)) < 0)
            return make_error(gnutls_message("DTLS PSK credentials", rc));
        const gnutls_datum_t key{const_cast<unsigned char*>(psk->psk.reveal().data()),
                                 static_cast<unsigned>(psk->psk.size())};
        if ((rc = gnutls_psk_set_client_credentials(psk_cred_, "psk", &key, GNUTLS_PSK_KEY_RAW)) < 0)
            return make_error(gnutls_message("DTLS PSK key", rc));
        if ((rc = gnutls_credentials_set(session_, GNUTLS_CRD_PSK, psk_cred_)) < 0)
            return make_error(gnutls_message("DTLS PSK credentials", rc));
    } else {
        auto& legacy = std::get<DtlsLegacyMode>(options.mode);
        legacy_ = true;
        if (!legacy.suite) return make_error("DTLS legacy mode needs a cipher suite");
        if (legacy.master_secret.size() != kDtlsMasterSecretSize)
            return make_error("DTLS master secret must be " + std::to_string(kDtlsMasterSecretSize) + " bytes");
        if (legacy.session_id.size() != kDtlsSessionIdSize)
            return make_error("X-DTLS-Session-ID must be " + std::to_string(kDtlsSessionIdSize) + " bytes, got " +
                              std::to_string(legacy.session_id.size()));
        if (legacy.tunnel_mtu == 0) return make_error("DTLS legacy mode needs the tunnel MTU (X-DTLS-MTU)");
        legacy_tunnel_mtu_ = legacy.tunnel_mtu;
        const std::string prio = std::string(legacy.suite->priority) + kNoExtensions;
        if ((rc = gnutls_priority_set_direct(session_, prio.c_str(), nullptr)) < 0)
            return make_error(gnutls_message(("DTLS priority '" + prio + "'").c_str(), rc));
        gnutls_record_disable_padding(session_);
        const gnutls_datum_t master{const_cast<unsigned char*>(legacy.master_secret.reveal().data()),
                                    static_cast<unsigned>(legacy.master_secret.size())};
        const gnutls_datum_t sid{legacy.session_id.data(), static_cast<unsigned>(legacy.session_id.size())};
        rc = gnutls_session_set_premaster(session_, GNUTLS_CLIENT, legacy.suite->version, legacy.suite->kx,
                                          legacy.suite->cipher, legacy.suite->mac, GNUTLS_COMP_NULL, &master, &sid);
        if (rc < 0) return make_error(gnutls_message("DTLS session resumption parameters", rc));
    }

    gnutls_transport_set_ptr(session_, this);
    gnutls_transport_set_push_function(session_, &DtlsChannel::push);
    gnutls_transport_set_pull_function(session_, &DtlsChannel::pull);
    gnutls_transport_set_pull_timeout_function(session_, &DtlsChannel::pull_timeout);
    const std::size_t link_mtu = anyconnect::dtls_link_mtu(base_mtu_, ipv6_outer_);
    if (link_mtu) gnutls_dtls_set_mtu(session_, static_cast<unsigned>(link_mtu));
    gnutls_dtls_set_timeouts(session_, static_cast<unsigned>(options.retransmit.count()),
                             static_cast<unsigned>(options.handshake_timeout.count()));
    handshake_deadline_ = std::chrono::steady_clock::now() + options.handshake_timeout;
    return {};
}

Result<bool> DtlsChannel::handshake_step() {
    if (established_) return true;
    const int rc = gnutls_handshake(session_);
    if (rc == 0) {
        if (Status s = finish_handshake(); !s) return s.error();
        return true;
    }
    if (rc == GNUTLS_E_TIMEDOUT || std::chrono::steady_clock::now() >= handshake_deadline_)
        return make_error(heard_from_server_
                              ? "DTLS handshake timed out after the server answered (it may not accept our key)"
                              : "DTLS handshake timed out (no answer from the server: is UDP blocked?)");
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED || !gnutls_error_is_fatal(rc)) {
        if (resend_due()) resend_flight();
        return false;
    }
    if (legacy_ && rc == GNUTLS_E_INSUFFICIENT_CREDENTIALS)  // it wants our certificate: a full handshake
        return make_error("DTLS server did not resume the agreed session but started a full handshake: "
                          "possible man-in-the-middle");
    if (rc == GNUTLS_E_PUSH_ERROR)
        return make_error(gnutls_message("DTLS handshake failed (is a firewall blocking UDP?)", rc));
    return make_error(gnutls_message("DTLS handshake failed", rc));
}

int DtlsChannel::handshake_wait_ms() const {
    const auto now = std::chrono::steady_clock::now();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(handshake_deadline_ - now);
    long long wait = gnutls_dtls_get_timeout(session_);
    // 0 with part of the answer in: GnuTLS has no timer running (it took that part as the
    // acknowledgement), ours does (resend_flight); any datagram ends the wait anyway.
    if (wait <= 0 && client_ && answered_ && !flight_.empty())
        wait = std::chrono::duration_cast<std::chrono::milliseconds>(last_io_ + resend_after_ - now).count();
    return static_cast<int>(std::clamp<long long>(std::min<long long>(wait, left.count()), 1, 60000));
}

void DtlsChannel::note_sent(const void* data, std::size_t size) {
    constexpr std::size_t kHeader = 13;  // DTLS record header: type, version, epoch, sequence, length
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    last_io_ = std::chrono::steady_clock::now();
    resend_after_ = first_resend_;
    // A datagram after the server's answer starts a new flight; GnuTLS's own retransmission
    // starts the same flight again (the same first record but for its sequence number).
    const auto same_body = [&](const std::vector<std::uint8_t>& d) {
        return d.size() == size && size >= kHeader && std::memcmp(d.data(), bytes, 3) == 0 &&
               std::memcmp(d.data() + 11, bytes + 11, size - 11) == 0;
    };
    if (answered_ || (!flight_.empty() && same_body(flight_.front()))) flight_.clear();
    answered_ = false;
    flight_.emplace_back(bytes, bytes + size);
}

bool DtlsChannel::resend_due() const {
    return client_ && !established_ && answered_ && !flight_.empty() &&
           std::chrono::steady_clock::now() - last_io_ >= resend_after_;
}

void DtlsChannel::resend_flight() {
    // Only a flight of epoch 0 records can be renumbered (a later epoch's sequence number is
    // part of its record's authentication); GnuTLS retransmits its final flight itself.
    for (const auto& d : flight_) {
        std::size_t at = 0;
        while (at + 13 <= d.size()) {
            if (d[at + 3] != 0 || d[at + 4] != 0) return;
            at += 13 + (static_cast<std::size_t>(d[at + 11]) << 8 | d[at + 12]);
        }
    }
    unsigned char state[8];
    if (gnutls_record_get_state(session_, 0, nullptr, nullptr, nullptr, state) < 0) return;
    std::uint64_t seq = 0;  // state: epoch (2 bytes) and sequence number (6)
    for (int i = 2; i < 8; ++i) seq = seq << 8 | state[i];
    for (auto& d : flight_) {
        std::size_t at = 0;
        while (at + 13 <= d.size()) {
            for (int i = 0; i < 6; ++i) d[at + 5 + i] = static_cast<std::uint8_t>(seq >> (8 * (5 - i)));
            ++seq;
            at += 13 + (static_cast<std::size_t>(d[at + 11]) << 8 | d[at + 12]);
        }
        (void)::send(fd_, d.data(), d.size(), MSG_NOSIGNAL);  // a loss is what the next resend is for
    }
    for (int i = 7; i >= 2; --i, seq >>= 8) state[i] = static_cast<unsigned char>(seq & 0xff);
    (void)gnutls_record_set_state(session_, 0, state);
    last_io_ = std::chrono::steady_clock::now();
    resend_after_ = std::min(resend_after_ * 2, std::chrono::milliseconds(60000));
}

Status DtlsChannel::handshake() {
    for (;;) {
        Result<bool> done = handshake_step();
        if (!done) return done.error();
        if (*done) return {};
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, handshake_wait_ms()) < 0 && errno != EINTR)
            return make_error(std::string("DTLS handshake: poll: ") + std::strerror(errno));
    }
}

Status DtlsChannel::finish_handshake() {
    if (legacy_) {
        // A real server never turns the agreed resumption into a full handshake.
        if (!gnutls_session_is_resumed(session_))
            return make_error("DTLS server did not resume the agreed session: possible man-in-the-middle");
        const int rc = gnutls_dtls_set_data_mtu(session_, static_cast<unsigned>(legacy_tunnel_mtu_ + 1));
        if (rc < 0) return make_error(gnutls_message("DTLS data MTU", rc));
    } else {
        if (anyconnect::dtls_link_mtu(base_mtu_, ipv6_outer_) == 0)
            return make_error("server base MTU " + std::to_string(base_mtu_) + " is too small for DTLS");
        gnutls_dtls_set_mtu(session_, static_cast<unsigned>(anyconnect::dtls_link_mtu(base_mtu_, ipv6_outer_)));
    }
    record_payload_mtu_ = gnutls_dtls_get_data_mtu(session_);
    established_ = true;
    take_over_records();
    return {};
}

// Anything from_gnutls refuses (CBC, DTLS 0.9) keeps GnuTLS's record path.
void DtlsChannel::take_over_records() {
    Result<DtlsRecordState> write = dtls_record_state(session_, false);
    if (!write || write->seq >= kDtlsMaxSeq - kSealerSeqGap) return;
    write->seq += kSealerSeqGap;
    Result<DtlsRecordSealer> sealer = DtlsRecordSealer::create(*write);
    Result<DtlsRecordOpener> opener = DtlsRecordOpener::from_gnutls(session_);
    if (!sealer || !opener) return;
    sealer_.emplace(std::move(sealer).value());
    opener_.emplace(std::move(opener).value());
    tx_record_.resize(record_payload_mtu_ + sealer_->overhead());
}

std::size_t DtlsChannel::tunnel_mtu() const {
    const std::size_t fits = anyconnect::dtls_tunnel_mtu(record_payload_mtu_);
    // Legacy: the server sized its tun by X-DTLS-MTU; CBC rounding may let a record carry more.
    return legacy_ ? std::min(fits, legacy_tunnel_mtu_) : fits;
}

std::string DtlsChannel::description() const { return tls_session_description(session_); }

bool DtlsChannel::resumed() const { return gnutls_session_is_resumed(session_) != 0; }

// Any identity (ocserv's clients say "psk"): the key is what proves the peer.
int DtlsChannel::server_psk(gnutls_session_t session, const char*, gnutls_datum_t* key) {
    const Secret& psk = static_cast<DtlsChannel*>(gnutls_session_get_ptr(session))->server_psk_;
    key->data = static_cast<unsigned char*>(gnutls_malloc(psk.size()));
    if (!key->data) return -1;
    std::memcpy(key->data, psk.reveal().data(), psk.size());
    key->size = static_cast<unsigned>(psk.size());
    return 0;
}

ssize_t DtlsChannel::push(gnutls_transport_ptr_t ptr, const void* data, size_t size) {
    if (RecordSink* sink = t_sink) {
        std::span<std::uint8_t> room = sink->out->next_room();
        if (room.size() < size) {
            errno = room.empty() ? EAGAIN : EMSGSIZE;
            return -1;
        }
        std::memcpy(room.data(), data, size);
        sink->out->commit(size);
        return static_cast<ssize_t>(size);
    }
    auto* self = static_cast<DtlsChannel*>(ptr);
    if (self->client_ && !self->established_) self->note_sent(data, size);
    return ::send(self->fd_, data, size, MSG_NOSIGNAL);
}

ssize_t DtlsChannel::pull(gnutls_transport_ptr_t ptr, void* data, size_t size) {
    if (DatagramSource* src = t_source) {
        if (*src->next >= src->end) {
            errno = EAGAIN;
            return -1;
        }
        std::span<const std::uint8_t> d = src->in->packet((*src->next)++);
        const std::size_t n = std::min(size, d.size());  // a longer datagram is truncated, as recv() would
        std::memcpy(data, d.data(), n);
        return static_cast<ssize_t>(n);
    }
    auto* self = static_cast<DtlsChannel*>(ptr);
    const ssize_t n = ::recv(self->fd_, data, size, 0);
    if (n > 0) {
        self->heard_from_server_ = true;
        if (!self->established_) {
            self->answered_ = true;
            self->last_io_ = std::chrono::steady_clock::now();
        }
    }
    return n;
}

int DtlsChannel::pull_timeout(gnutls_transport_ptr_t ptr, unsigned int ms) {
    if (DatagramSource* src = t_source) return *src->next < src->end ? 1 : 0;
    pollfd p{static_cast<DtlsChannel*>(ptr)->fd_, POLLIN, 0};
    const int timeout = ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : static_cast<int>(ms);
    const int rc = ::poll(&p, 1, timeout);
    return rc < 0 ? -1 : rc;
}

DtlsSealOutcome DtlsChannel::seal_batch(const PacketBatch& in, PacketBatch& out, std::size_t first) {
    DtlsSealOutcome o;
    RecordSink sink{&out};  // where GnuTLS's push puts its record (unused by our sealer)
    t_sink = &sink;
    // One record appended to `out`, by our sealer or by GnuTLS.
    auto seal = [&](std::span<const std::uint8_t> p) {
        if (sealer_) {
            const std::size_t n = sealer_->seal(p, out.next_room());
            if (n != 0) out.commit(n);
            return n != 0;
        }
        const std::size_t before = out.size();
        const ssize_t rc = gnutls_record_send(session_, p.data(), p.size());
        return rc >= 0 && out.size() == before + 1;
    };
    std::size_t i = first;
    for (; i < in.size() && !out.full(); ++i) {
        std::span<const std::uint8_t> p = in.packet(i);
        if (p.size() > record_payload_mtu_) ++o.too_big;
        else if (seal(p)) ++o.records;
        else ++o.failed;
    }
    t_sink = nullptr;
    o.next = i;
    return o;
}

Status DtlsChannel::send_record(std::span<const std::uint8_t> plaintext) {
    if (!established_) return make_error("DTLS: not connected");
    if (plaintext.size() > record_payload_mtu_)
        return make_error("DTLS: record of " + std::to_string(plaintext.size()) + " bytes exceeds the MTU " +
                          std::to_string(record_payload_mtu_));
    if (sealer_) {
        const std::size_t n = sealer_->seal(plaintext, tx_record_);
        if (n == 0) return make_error("DTLS send: the record could not be sealed");
        if (::send(fd_, tx_record_.data(), n, MSG_NOSIGNAL) < 0)
            return make_error(std::string("DTLS send: ") + std::strerror(errno));
        return {};
    }
    const ssize_t rc = gnutls_record_send(session_, plaintext.data(), plaintext.size());
    if (rc < 0) return make_error(gnutls_message("DTLS send", static_cast<int>(rc)));
    return {};
}

Result<DtlsOpenOutcome> DtlsChannel::open_batch(const PacketBatch& in, PacketBatch& out) {
    DtlsOpenOutcome o;
    const std::size_t start = rx_next_;
    // Without our opener GnuTLS reads the whole batch; with it, only the datagram
    // our opener called not ours (an alert, a handshake message, junk).
    DatagramSource src{&in, &rx_next_, opener_ ? rx_next_ : in.size()};
    t_source = &src;
    // Each round yields a record, or consumes at least one datagram, or stops:
    // bounded by the datagrams plus the records GnuTLS may still hold.
    for (std::size_t rounds = 0; rounds < 4 * in.size() + 64; ++rounds) {
        if (out.full()) {
            o.more = rx_next_ < in.size() || gnutls_record_check_pending(session_) > 0;
            break;
        }
        std::span<std::uint8_t> room = out.next_room();
        if (opener_ && gnutls_record_check_pending(session_) == 0) {
            if (rx_next_ >= in.size()) break;
            const DtlsRecordOpened r = opener_->open(in.packet(rx_next_), room);
            if (r.status != DtlsOpenStatus::not_ours) {
                ++rx_next_;
                if (r.status == DtlsOpenStatus::ok) {
                    out.commit(r.length);
                    ++o.records;
                } else {
                    ++o.discarded;  // bad tag, replay, too short
                }
                continue;
            }
            src.end = rx_next_ + 1;
        }
        const std::size_t before = rx_next_;
        const ssize_t n = gnutls_record_recv(session_, room.data(), room.size());
        if (n > 0) {
            out.commit(static_cast<std::size_t>(n));
            ++o.records;
            continue;
        }
        if (n == 0) {
            o.peer_closed = true;
            break;
        }
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            o.discarded += rx_next_ - before;  // datagrams read that yielded nothing
            if (rx_next_ >= in.size()) break;
            continue;
        }
        if (gnutls_error_is_fatal(static_cast<int>(n))) {
            t_source = nullptr;
            rx_next_ = 0;
            return make_error(gnutls_message("DTLS receive", static_cast<int>(n)));
        }
        ++o.discarded;  // a warning alert, an unexpected handshake message...
    }
    t_source = nullptr;
    o.datagrams = rx_next_ - start;
    if (!o.more) rx_next_ = 0;
    return o;
}

}  // namespace espvpn::io
