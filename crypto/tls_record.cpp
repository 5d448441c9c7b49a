#include "crypto/tls_record.h"

#include <array>
#include <cstring>

#include "crypto/record_aead.h"
#include "protocols/base/byte_order.h"

namespace espvpn {

namespace {
using record_aead::AeadHandle;
using record_aead::kNonceSize;
using record_aead::kTagSize;

constexpr std::size_t kMaxPlaintext = 16384;         // 2^14
constexpr std::size_t kMaxTls13Ciphertext = 16384 + 256;  // RFC 8446 §5.2
constexpr std::uint16_t kTls12Wire = 0x0303;         // the record version of TLS 1.2 and 1.3

const char* aead_name(DtlsAead a) {
    switch (a) {
        case DtlsAead::aes128_gcm: return "AES-128-GCM";
        case DtlsAead::aes256_gcm: return "AES-256-GCM";
        case DtlsAead::chacha20_poly1305: return "CHACHA20-POLY1305";
    }
    return "?";
}

struct ReadState {
    DtlsAead aead = DtlsAead::aes128_gcm;
    bool tls13 = false;
    std::array<std::uint8_t, 32> key{};
    std::array<std::uint8_t, kNonceSize> iv{};
    std::uint64_t seq = 0;
    ~ReadState() {
        secure_zero(key.data(), key.size());
        secure_zero(iv.data(), iv.size());
    }
};

Status read_state(gnutls_session_t session, ReadState& s) {
    if (!session) return make_error("TLS record: no session");
    const gnutls_protocol_t v = gnutls_protocol_get_version(session);
    if (v != GNUTLS_TLS1_2 && v != GNUTLS_TLS1_3)
        return make_error(std::string("TLS record: ") + (gnutls_protocol_get_name(v) ? gnutls_protocol_get_name(v) : "?") +
                          " is not TLS 1.2 or 1.3 (GnuTLS keeps the records)");
    s.tls13 = v == GNUTLS_TLS1_3;
    const gnutls_cipher_algorithm_t cipher = gnutls_cipher_get(session);
    if (!record_aead::aead_of(cipher, s.aead))
        return make_error(std::string("TLS record: cipher ") + gnutls_cipher_get_name(cipher) +
                          " is not an AEAD we open (GnuTLS keeps the records)");
    gnutls_datum_t mac_key{}, iv{}, key{};
    std::array<std::uint8_t, 8> seq{};
    const int rc = gnutls_record_get_state(session, 1, &mac_key, &iv, &key, seq.data());
    if (rc < 0) return make_error(std::string("TLS record: gnutls_record_get_state: ") + gnutls_strerror(rc));
    // TLS 1.2 GCM: the 4-byte salt; ChaCha and TLS 1.3: the 12-byte IV.
    const std::size_t want_iv = (s.tls13 || s.aead == DtlsAead::chacha20_poly1305) ? kNonceSize : record_aead::kGcmSaltSize;
    if (key.size != record_aead::key_size(s.aead) || iv.size != want_iv)
        return make_error("TLS record: GnuTLS gave a " + std::to_string(key.size) + "-byte key and a " +
                          std::to_string(iv.size) + "-byte IV for " + gnutls_cipher_get_name(cipher));
    std::memcpy(s.key.data(), key.data, key.size);
    s.iv = {};
    std::memcpy(s.iv.data(), iv.data, iv.size);
    s.seq = load_be64(seq.data());
    return {};
}
}  // namespace

struct TlsRecordOpener::Impl {
    AeadHandle aead;
    std::array<std::uint8_t, 32> key{};  // to tell a new key from the same one on reload()
    ~Impl() { secure_zero(key.data(), key.size()); }
};

TlsRecordOpener::TlsRecordOpener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsRecordOpener::TlsRecordOpener(TlsRecordOpener&&) noexcept = default;
TlsRecordOpener& TlsRecordOpener::operator=(TlsRecordOpener&&) noexcept = default;
TlsRecordOpener::~TlsRecordOpener() = default;

Result<TlsRecordOpener> TlsRecordOpener::from_gnutls(gnutls_session_t session) {
    TlsRecordOpener o(std::make_unique<Impl>());
    if (Status st = o.reload(session); !st) return st.error();
    return o;
}

Status TlsRecordOpener::reload(gnutls_session_t session) {
    ReadState s;
    if (Status st = read_state(session, s); !st) return st;
    const bool same = impl_->aead.ready() && s.aead == aead_ && s.tls13 == tls13_ && s.key == impl_->key &&
                      s.iv == impl_->aead.fixed;
    if (!same) {
        if (Status st = impl_->aead.init(s.aead, s.key.data(), s.iv, "TLS record"); !st) return st;
        impl_->key = s.key;
        aead_ = s.aead;
        tls13_ = s.tls13;
    }
    seq_ = s.seq;
    return {};
}

std::string TlsRecordOpener::describe() const {
    return std::string(tls13_ ? "TLS1.3 " : "TLS1.2 ") + aead_name(aead_);
}

TlsRecordOpened TlsRecordOpener::open(std::span<const std::uint8_t> record, std::span<std::uint8_t> out) noexcept {
    TlsRecordOpened r;
    if (record.size() < kTlsRecordHeaderSize || !impl_->aead.ready()) return r;
    const std::uint8_t* p = record.data();
    const std::size_t body = record.size() - kTlsRecordHeaderSize;
    if (p[0] != kTlsContentApplicationData || load_be16(p + 1) != kTls12Wire || load_be16(p + 3) != body) return r;
    std::array<std::uint8_t, 8> seq_be;
    store_be64(seq_be.data(), seq_);
    std::array<std::uint8_t, kNonceSize> nonce;
    r.status = TlsOpenStatus::bad;
    const std::uint8_t* ctext;
    std::size_t ctext_len;
    std::array<std::uint8_t, 13> aad12;
    const std::uint8_t* aad;
    std::size_t aad_len;
    if (tls13_) {
        if (body < kTagSize + 1 || body > kMaxTls13Ciphertext) return r;
        record_aead::xor_nonce(nonce.data(), impl_->aead.fixed.data(), seq_be.data());
        ctext = p + kTlsRecordHeaderSize;
        ctext_len = body;
        aad = p;
        aad_len = kTlsRecordHeaderSize;
    } else {
        const std::size_t explicit_n = aead_ == DtlsAead::chacha20_poly1305 ? 0 : 8;
        if (body < explicit_n + kTagSize || body - explicit_n - kTagSize > kMaxPlaintext) return r;
        if (explicit_n)
            record_aead::salt_nonce(nonce.data(), impl_->aead.fixed.data(), p + kTlsRecordHeaderSize);
        else
            record_aead::xor_nonce(nonce.data(), impl_->aead.fixed.data(), seq_be.data());
        ctext = p + kTlsRecordHeaderSize + explicit_n;
        ctext_len = body - explicit_n;
        std::memcpy(aad12.data(), seq_be.data(), 8);
        aad12[8] = kTlsContentApplicationData;
        store_be16(aad12.data() + 9, kTls12Wire);
        store_be16(aad12.data() + 11, ctext_len - kTagSize);
        aad = aad12.data();
        aad_len = aad12.size();
    }
    const std::size_t plain = ctext_len - kTagSize;
    if (out.size() < plain) return r;
    if (!impl_->aead.open(nonce.data(), aad, aad_len, ctext, ctext_len, out.data())) return r;
    std::size_t len = plain;
    if (tls13_) {
        // The inner content type is the last non-zero byte; none: a bad record (GnuTLS's alert).
        while (len > 0 && out[len - 1] == 0) --len;
        if (len == 0) return r;
        --len;
        if (out[len] != kTlsContentApplicationData) {
            r.status = TlsOpenStatus::not_ours;  // KeyUpdate, NewSessionTicket, alert: GnuTLS's
            return r;
        }
        if (len > kMaxPlaintext) return r;
    }
    ++seq_;
    r.status = TlsOpenStatus::ok;
    r.length = len;
    return r;
}

}  // namespace espvpn
