#include "crypto/aead.h"

#include <cstring>
#include <string>

#include "crypto/secret.h"

namespace espvpn {

namespace {
bool is_aes_gcm(gnutls_cipher_algorithm_t c) {
    return c == GNUTLS_CIPHER_AES_128_GCM || c == GNUTLS_CIPHER_AES_256_GCM;
}

AesGcm::Path path_of(Aead::Engine e) {
    switch (e) {
        case Aead::Engine::fastest: return AesGcm::chosen();
        case Aead::Engine::gnutls: return AesGcm::Path::gnutls;
        case Aead::Engine::vaes_avx2: return AesGcm::Path::avx2;
        case Aead::Engine::vaes_avx512: return AesGcm::Path::avx512;
    }
    return AesGcm::Path::gnutls;
}
}  // namespace

Status Aead::init(gnutls_cipher_algorithm_t cipher, const std::uint8_t* key, std::size_t key_len, const char* what,
                  Engine engine) {
    reset();
    const std::size_t want = gnutls_cipher_get_key_size(cipher);
    if (want == 0 || key_len != want)
        return make_error(std::string(what) + ": a key of " + std::to_string(key_len) + " bytes for " +
                          (gnutls_cipher_get_name(cipher) ? gnutls_cipher_get_name(cipher) : "an unknown cipher"));
    const AesGcm::Path path = is_aes_gcm(cipher) ? path_of(engine) : AesGcm::Path::gnutls;
    vector_ = path != AesGcm::Path::gnutls && vaes_.set_key(key, key_len, path);  // false: the CPU lacks it
    if (vector_) return {};
    gnutls_datum_t kd{const_cast<std::uint8_t*>(key), static_cast<unsigned>(key_len)};
    const int rc = gnutls_aead_cipher_init(&gnutls_, cipher, &kd);
    if (rc < 0) {
        gnutls_ = nullptr;
        return make_error(std::string(what) + ": gnutls_aead_cipher_init failed: " + gnutls_strerror(rc));
    }
    return {};
}

void Aead::reset() {
    if (gnutls_) gnutls_aead_cipher_deinit(gnutls_);
    gnutls_ = nullptr;
    vector_ = false;
}

bool Aead::seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
                std::uint8_t* out, std::size_t len, std::uint8_t* tag) const {
    if (vector_) {
        vaes_.seal(nonce, aad, aad_len, in, out, len, tag);
        return true;
    }
    if (!gnutls_) return false;
    if (in != out && tag == out + len) {  // text then tag, one buffer: GnuTLS's out-of-place call
        std::size_t out_len = len + kTagSize;
        return gnutls_aead_cipher_encrypt(gnutls_, nonce, kNonceSize, aad, aad_len, kTagSize, in, len, out,
                                          &out_len) >= 0 &&
               out_len == len + kTagSize;
    }
    if (in != out) std::memcpy(out, in, len);
    giovec_t a{const_cast<std::uint8_t*>(aad), aad_len};
    giovec_t data{out, len};
    std::size_t tag_len = kTagSize;
    return gnutls_aead_cipher_encryptv2(gnutls_, nonce, kNonceSize, &a, 1, &data, 1, tag, &tag_len) >= 0 &&
           tag_len == kTagSize;
}

bool Aead::open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
                std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) const {
    if (vector_) return vaes_.open(nonce, aad, aad_len, in, out, len, tag, tag_len);
    bool ok = false;
    if (gnutls_ && tag_len > 0 && tag_len <= kTagSize) {
        if (in != out && tag == in + len) {  // text then tag, one buffer: GnuTLS's out-of-place call
            std::size_t plain_len = len;
            ok = gnutls_aead_cipher_decrypt(gnutls_, nonce, kNonceSize, aad, aad_len, tag_len, in, len + tag_len, out,
                                            &plain_len) >= 0 &&
                 plain_len == len;
        } else {
            if (in != out) std::memcpy(out, in, len);
            giovec_t a{const_cast<std::uint8_t*>(aad), aad_len};
            giovec_t data{out, len};
            ok = gnutls_aead_cipher_decryptv2(gnutls_, nonce, kNonceSize, &a, 1, &data, 1,
                                              const_cast<std::uint8_t*>(tag), tag_len) >= 0;
        }
    }
    if (!ok) secure_zero(out, len);
    return ok;
}

}  // namespace espvpn
