// AEAD through record_aead::AeadHandle (our VAES AES-GCM where the CPU has it, else GnuTLS),
// out of place: the datapath's input and output batches are separate slots, so the
// cipher writes straight into the output and nothing is copied twice.
#include "crypto/dtls_record.h"

#include <gnutls/crypto.h>

#include <cstring>
#include <string>

#include "crypto/record_aead.h"
#include "crypto/secret.h"
#include "protocols/base/byte_order.h"

namespace espvpn {

namespace {

constexpr std::size_t kMaxPlaintext = 16384;  // 2^14 (RFC 5246 §6.2.1)
using record_aead::AeadHandle;
using record_aead::kGcmSaltSize;
using record_aead::kNonceSize;
using record_aead::key_size;

std::size_t explicit_nonce_size(DtlsAead a) { return a == DtlsAead::chacha20_poly1305 ? 0 : 8; }

// epoch ‖ seq as the 8 bytes of the header (and of the AAD, and GCM's explicit nonce).
void store_epoch_seq(std::uint8_t* p, std::uint16_t epoch, std::uint64_t seq) {
    store_be64(p, (std::uint64_t{epoch} << 48) | (seq & kDtlsMaxSeq));
}

// The 13 bytes of additional data: epoch ‖ seq ‖ type ‖ version ‖ plaintext length.
void make_aad(std::uint8_t* aad, const std::uint8_t* epoch_seq, std::size_t plaintext_len) {
    std::memcpy(aad, epoch_seq, 8);
    aad[8] = kDtlsContentApplicationData;
    store_be16(aad + 9, kDtls12Version);
    store_be16(aad + 11, plaintext_len);
}

// fixed: GCM's salt (4 bytes used) or ChaCha's IV (12). explicit_part: the record's 8 bytes.
void make_nonce(DtlsAead aead, std::uint8_t* nonce, const std::uint8_t* fixed, const std::uint8_t* explicit_part) {
    if (aead == DtlsAead::chacha20_poly1305)
        record_aead::xor_nonce(nonce, fixed, explicit_part);
    else
        record_aead::salt_nonce(nonce, fixed, explicit_part);
}

Status init_aead(AeadHandle& h, const DtlsRecordState& s) { return h.init(s.aead, s.key.data(), s.iv, "DTLS record"); }

}  // namespace

std::size_t dtls_record_overhead(DtlsAead aead) {
    return kDtlsRecordHeaderSize + explicit_nonce_size(aead) + kDtlsAeadTagSize;
}

DtlsRecordState::~DtlsRecordState() {
    secure_zero(key.data(), key.size());
    secure_zero(iv.data(), iv.size());
}

Result<DtlsRecordState> dtls_record_state(gnutls_session_t session, bool read) {
    if (!session) return make_error("DTLS record: no session");
    if (gnutls_protocol_get_version(session) != GNUTLS_DTLS1_2)
        return make_error("DTLS record: not DTLS 1.2 (GnuTLS keeps the records)");
    DtlsRecordState s;
    const gnutls_cipher_algorithm_t cipher = gnutls_cipher_get(session);
    if (!record_aead::aead_of(cipher, s.aead))
        return make_error(std::string("DTLS record: cipher ") + gnutls_cipher_get_name(cipher) +
                          " is not an AEAD we seal (GnuTLS keeps the records)");
    gnutls_datum_t mac_key{}, iv{}, key{};
    std::array<std::uint8_t, 8> seq{};
    const int rc = gnutls_record_get_state(session, read ? 1 : 0, &mac_key, &iv, &key, seq.data());
    if (rc < 0) return make_error(std::string("DTLS record: gnutls_record_get_state: ") + gnutls_strerror(rc));
    const std::size_t want_iv = s.aead == DtlsAead::chacha20_poly1305 ? kNonceSize : kGcmSaltSize;
    if (key.size != key_size(s.aead) || iv.size != want_iv)
        return make_error("DTLS record: GnuTLS gave a " + std::to_string(key.size) + "-byte key and a " +
                          std::to_string(iv.size) + "-byte IV for " + gnutls_cipher_get_name(cipher));
    std::memcpy(s.key.data(), key.data, key.size);
    std::memcpy(s.iv.data(), iv.data, iv.size);
    // GnuTLS keeps a DTLS sequence number as epoch ‖ 48-bit seq.
    const std::uint64_t es = load_be64(seq.data());
    s.epoch = static_cast<std::uint16_t>(es >> 48);
    s.seq = es & kDtlsMaxSeq;
    return s;
}

// ---- sealer -------------------------------------------------------------------------

struct DtlsRecordSealer::Impl {
    AeadHandle aead;
};

DtlsRecordSealer::DtlsRecordSealer(DtlsAead aead, std::uint16_t epoch, std::uint64_t seq, std::unique_ptr<Impl> impl)
    : aead_(aead), epoch_(epoch), seq_(seq), impl_(std::move(impl)) {}
DtlsRecordSealer::DtlsRecordSealer(DtlsRecordSealer&&) noexcept = default;
DtlsRecordSealer& DtlsRecordSealer::operator=(DtlsRecordSealer&&) noexcept = default;
DtlsRecordSealer::~DtlsRecordSealer() = default;

Result<DtlsRecordSealer> DtlsRecordSealer::create(const DtlsRecordState& state) {
    auto impl = std::make_unique<Impl>();
    if (Status st = init_aead(impl->aead, state); !st) return st.error();
    return DtlsRecordSealer(state.aead, state.epoch, state.seq, std::move(impl));
}

Result<DtlsRecordSealer> DtlsRecordSealer::from_gnutls(gnutls_session_t session) {
    Result<DtlsRecordState> s = dtls_record_state(session, false);
    if (!s) return s.error();
    return create(*s);
}

std::size_t DtlsRecordSealer::seal(std::span<const std::uint8_t> plaintext, std::span<std::uint8_t> out) noexcept {
    const std::size_t len = plaintext.size();
    const std::size_t explicit_n = explicit_nonce_size(aead_);
    const std::size_t total = kDtlsRecordHeaderSize + explicit_n + len + kDtlsAeadTagSize;
    // The last number is kept back: a peer could not tell its successor from a wrap.
    if (len > kMaxPlaintext || out.size() < total || seq_ >= kDtlsMaxSeq) return 0;
    std::uint8_t* p = out.data();
    p[0] = kDtlsContentApplicationData;
    store_be16(p + 1, kDtls12Version);
    store_epoch_seq(p + 3, epoch_, seq_);
    store_be16(p + 11, total - kDtlsRecordHeaderSize);
    std::array<std::uint8_t, 13> aad;
    make_aad(aad.data(), p + 3, len);
    std::array<std::uint8_t, kNonceSize> nonce;
    make_nonce(aead_, nonce.data(), impl_->aead.fixed.data(), p + 3);
    if (explicit_n) std::memcpy(p + kDtlsRecordHeaderSize, p + 3, explicit_n);
    static_assert(kDtlsAeadTagSize == record_aead::kTagSize);
    if (!impl_->aead.seal(nonce.data(), aad.data(), aad.size(), plaintext.data(), len,
                          p + kDtlsRecordHeaderSize + explicit_n))
        return 0;
    ++seq_;
    return total;
}

// ---- opener -------------------------------------------------------------------------

struct DtlsRecordOpener::Impl {
    AeadHandle aead;
};

DtlsRecordOpener::DtlsRecordOpener(DtlsAead aead, std::uint16_t epoch, std::unique_ptr<Impl> impl)
    : aead_(aead), epoch_(epoch), impl_(std::move(impl)) {}
DtlsRecordOpener::DtlsRecordOpener(DtlsRecordOpener&&) noexcept = default;
DtlsRecordOpener& DtlsRecordOpener::operator=(DtlsRecordOpener&&) noexcept = default;
DtlsRecordOpener::~DtlsRecordOpener() = default;

Result<DtlsRecordOpener> DtlsRecordOpener::create(const DtlsRecordState& state) {
    auto impl = std::make_unique<Impl>();
    if (Status st = init_aead(impl->aead, state); !st) return st.error();
    return DtlsRecordOpener(state.aead, state.epoch, std::move(impl));
}

Result<DtlsRecordOpener> DtlsRecordOpener::from_gnutls(gnutls_session_t session) {
    Result<DtlsRecordState> s = dtls_record_state(session, true);
    if (!s) return s.error();
    return create(*s);
}

DtlsRecordOpened DtlsRecordOpener::open(std::span<const std::uint8_t> d, std::span<std::uint8_t> out) noexcept {
    DtlsRecordOpened r;
    if (d.size() < kDtlsRecordHeaderSize) return r;
    const std::uint8_t* p = d.data();
    // Anything but exactly one record of ours is GnuTLS's, which parses the rest as it always did.
    if (p[0] != kDtlsContentApplicationData || load_be16(p + 1) != kDtls12Version || load_be16(p + 3) != epoch_ ||
        load_be16(p + 11) != d.size() - kDtlsRecordHeaderSize)
        return r;
    const std::size_t explicit_n = explicit_nonce_size(aead_);
    const std::size_t body = d.size() - kDtlsRecordHeaderSize;
    r.status = DtlsOpenStatus::bad_length;
    if (body < explicit_n + kDtlsAeadTagSize) return r;
    const std::size_t len = body - explicit_n - kDtlsAeadTagSize;
    if (out.size() < len) return r;
    const std::uint64_t seq = load_be64(p + 3) & kDtlsMaxSeq;
    if (window_.check(seq) != ReplayVerdict::fresh) {
        r.status = DtlsOpenStatus::replayed;
        return r;
    }
    std::array<std::uint8_t, 13> aad;
    make_aad(aad.data(), p + 3, len);
    std::array<std::uint8_t, kNonceSize> nonce;
    make_nonce(aead_, nonce.data(), impl_->aead.fixed.data(), explicit_n ? p + kDtlsRecordHeaderSize : p + 3);
    if (!impl_->aead.open(nonce.data(), aad.data(), aad.size(), p + kDtlsRecordHeaderSize + explicit_n,
                          body - explicit_n, out.data())) {
        r.status = DtlsOpenStatus::bad_tag;
        return r;
    }
    window_.accept(seq);
    r.status = DtlsOpenStatus::ok;
    r.length = len;
    return r;
}

}  // namespace espvpn
