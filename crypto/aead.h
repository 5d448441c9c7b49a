// One AEAD key, the one place that picks how it runs: AES-GCM through our VAES code
// where the CPU has it (crypto/aes_gcm.h: AesGcm::chosen()), everything else (AES-GCM elsewhere,
// ChaCha20-Poly1305) through GnuTLS's gnutls_aead_cipher_*. ESP (esp_transform.cpp) and
// the DTLS/TLS records we seal and open ourselves (record_aead.h) both hold one.
//
// Usage:
//   Aead a;
//   if (auto st = a.init(GNUTLS_CIPHER_AES_128_GCM, key, 16); !st) ...;
//   a.seal(nonce12, aad, aad_len, in, out, len, tag16);          // in == out: in place
//   if (!a.open(nonce12, aad, aad_len, in, out, len, tag, tag_len)) ...;  // out zeroed
// The nonce is 12 bytes, the tag written 16 bytes. open() takes a tag of tag_len bytes
// (1..16; ESP's truncated ICVs) and on a wrong one returns false with `out` zeroed, on
// either path: the plaintext of a forgery never leaves.
#pragma once

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <cstddef>
#include <cstdint>

#include "crypto/aes_gcm.h"
#include "protocols/base/result.h"

namespace espvpn {

class Aead {
public:
    static constexpr std::size_t kNonceSize = 12;
    static constexpr std::size_t kTagSize = 16;
    // fastest: AES-GCM on AesGcm::chosen() (our vector code where the CPU has it, unless
    // ESPVPN_GCM_VAES says otherwise); gnutls: GnuTLS always; vaes_avx2, vaes_avx512: that
    // path of ours where the CPU has it, GnuTLS where not (tests, benchmarks).
    enum class Engine { fastest, gnutls, vaes_avx2, vaes_avx512 };

    Aead() = default;
    Aead(const Aead&) = delete;
    Aead& operator=(const Aead&) = delete;
    ~Aead() { reset(); }

    // AES-128-GCM, AES-256-GCM or ChaCha20-Poly1305 with a key of its size; `what` prefixes the error.
    Status init(gnutls_cipher_algorithm_t cipher, const std::uint8_t* key, std::size_t key_len,
                const char* what = "AEAD", Engine engine = Engine::fastest);
    void reset();
    bool ready() const { return gnutls_ || vector_; }
    bool vector_path() const { return vector_; }
    // What seals and opens AES-GCM here (gnutls also for ChaCha20-Poly1305).
    AesGcm::Path gcm_path() const { return vector_ ? vaes_.path() : AesGcm::Path::gnutls; }

    // len bytes from in to out (in == out, or not overlapping), the 16-byte tag to `tag`.
    bool seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
              std::uint8_t* out, std::size_t len, std::uint8_t* tag) const;
    // len bytes from in to out (in == out, or not overlapping) if the first tag_len bytes
    // of the tag are right; otherwise false and out zeroed.
    bool open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
              std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) const;

private:
    gnutls_aead_cipher_hd_t gnutls_ = nullptr;
    AesGcm vaes_;
    bool vector_ = false;
};

}  // namespace espvpn
