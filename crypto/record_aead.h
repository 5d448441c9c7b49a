// The AEAD handle both record layers we open ourselves share (crypto/dtls_record for
// DTLS 1.2, crypto/tls_record for TLS 1.2/1.3): the key (crypto/aead.h) and the fixed part
// of the nonce that a GnuTLS session negotiated. Internal to crypto/.
#pragma once

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "crypto/aead.h"
#include "crypto/dtls_record.h"
#include "crypto/secret.h"
#include "protocols/base/result.h"

namespace espvpn::record_aead {

inline constexpr std::size_t kNonceSize = 12;
inline constexpr std::size_t kGcmSaltSize = 4;
inline constexpr std::size_t kTagSize = 16;

inline std::size_t key_size(DtlsAead a) { return a == DtlsAead::aes128_gcm ? 16 : 32; }

inline gnutls_cipher_algorithm_t gnutls_cipher_of(DtlsAead a) {
    switch (a) {
        case DtlsAead::aes128_gcm: return GNUTLS_CIPHER_AES_128_GCM;
        case DtlsAead::aes256_gcm: return GNUTLS_CIPHER_AES_256_GCM;
        case DtlsAead::chacha20_poly1305: return GNUTLS_CIPHER_CHACHA20_POLY1305;
    }
    return GNUTLS_CIPHER_UNKNOWN;
}

// The AEAD a GnuTLS cipher is, if it is one we open; false otherwise.
inline bool aead_of(gnutls_cipher_algorithm_t c, DtlsAead& out) {
    switch (c) {
        case GNUTLS_CIPHER_AES_128_GCM: out = DtlsAead::aes128_gcm; return true;
        case GNUTLS_CIPHER_AES_256_GCM: out = DtlsAead::aes256_gcm; return true;
        case GNUTLS_CIPHER_CHACHA20_POLY1305: out = DtlsAead::chacha20_poly1305; return true;
        default: return false;
    }
}

// nonce = fixed (12 bytes) XOR (0^4 ‖ seq64): ChaCha20-Poly1305 in TLS 1.2 and DTLS
// (RFC 7905), every AEAD in TLS 1.3 (RFC 8446 §5.3).
inline void xor_nonce(std::uint8_t* nonce, const std::uint8_t* fixed, const std::uint8_t* seq_be8) {
    std::memcpy(nonce, fixed, kNonceSize);
    for (std::size_t i = 0; i < 8; ++i) nonce[4 + i] ^= seq_be8[i];
}
// nonce = 4-byte salt ‖ the record's 8-byte explicit nonce: AES-GCM in TLS/DTLS 1.2 (RFC 5288).
inline void salt_nonce(std::uint8_t* nonce, const std::uint8_t* fixed, const std::uint8_t* explicit_part) {
    std::memcpy(nonce, fixed, kGcmSaltSize);
    std::memcpy(nonce + kGcmSaltSize, explicit_part, 8);
}

// A record layer's key (crypto/aead.h picks our VAES AES-GCM or GnuTLS) and the fixed
// part of its nonce.
struct AeadHandle {
    Aead aead;
    std::array<std::uint8_t, kNonceSize> fixed{};
    AeadHandle() = default;
    AeadHandle(const AeadHandle&) = delete;
    AeadHandle& operator=(const AeadHandle&) = delete;
    ~AeadHandle() { reset(); }
    bool ready() const { return aead.ready(); }
    void reset() {
        aead.reset();
        secure_zero(fixed.data(), fixed.size());
    }
    // `what`: the error's prefix ("DTLS record", "TLS record").
    Status init(DtlsAead a, const std::uint8_t* key, const std::array<std::uint8_t, kNonceSize>& iv,
                const char* what) {
        reset();
        fixed = iv;
        return aead.init(gnutls_cipher_of(a), key, key_size(a), what);
    }
    // text (len bytes) to out: the ciphertext, then the kTagSize-byte tag.
    bool seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* text,
              std::size_t len, std::uint8_t* out) const {
        return aead.seal(nonce, aad, aad_len, text, out, len, out + len);
    }
    // ctext_len bytes (the ciphertext and its kTagSize-byte tag) to ctext_len - kTagSize
    // bytes of plaintext in out; false: too short or the tag is wrong.
    bool open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* ctext,
              std::size_t ctext_len, std::uint8_t* out) const {
        if (ctext_len < kTagSize) return false;
        const std::size_t len = ctext_len - kTagSize;
        return aead.open(nonce, aad, aad_len, ctext, out, len, ctext + len, kTagSize);
    }
};

}  // namespace espvpn::record_aead
