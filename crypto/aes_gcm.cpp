#include "crypto/aes_gcm.h"

#include <cstdlib>
#include <cstring>

#include "crypto/aes_gcm_avx2.h"
#include "crypto/aes_gcm_avx512.h"
#include "crypto/cpu_features.h"
#include "crypto/gcm_clmul.h"
#include "crypto/secret.h"

namespace espvpn {

bool AesGcm::cpu_has(Path p) {
    static const CpuFeatures f = detect_cpu_features();
    const bool vector = f.aes_ni && f.pclmul && f.vaes && f.vpclmulqdq;
    switch (p) {
        case Path::gnutls: return true;
        case Path::avx2: return vector && f.avx2;
        case Path::avx512: return vector && f.avx512;
    }
    return false;
}

AesGcm::Path AesGcm::cpu_best() {
    if (cpu_has(Path::avx512)) return Path::avx512;
    if (cpu_has(Path::avx2)) return Path::avx2;
    return Path::gnutls;
}

AesGcm::Path AesGcm::chosen() {
    const Path best = cpu_best();
    const char* force = std::getenv("ESPVPN_GCM_VAES");
    if (!force) return best;
    if (std::strcmp(force, "0") == 0) return Path::gnutls;
    if (std::strcmp(force, "avx2") == 0) return cpu_has(Path::avx2) ? Path::avx2 : Path::gnutls;
    return best;
}

const char* AesGcm::name(Path p) {
    switch (p) {
        case Path::gnutls: return "GnuTLS";
        case Path::avx2: return "VAES-AVX2";
        case Path::avx512: return "VAES-AVX-512";
    }
    return "?";
}

AesGcm::~AesGcm() { secure_zero(&key_, sizeof key_); }

bool AesGcm::set_key(const std::uint8_t* key, std::size_t key_len, Path path) {
    path_ = Path::gnutls;
    if ((key_len != 16 && key_len != 32) || path == Path::gnutls || !cpu_has(path)) return false;
#if defined(__x86_64__)
    gcm_clmul::set_key(key_, key, key_len);
    path_ = path;
    return true;
#else
    return false;
#endif
}

void AesGcm::seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
                  std::uint8_t* out, std::size_t len, std::uint8_t* tag) const {
#if defined(__x86_64__)
    if (path_ == Path::avx512) gcm_avx512::seal(key_, nonce, aad, aad_len, in, out, len, tag);
    else if (path_ == Path::avx2) gcm_avx2::seal(key_, nonce, aad, aad_len, in, out, len, tag);
#endif
}

bool AesGcm::open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
                  std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) const {
    if (tag_len == 0 || tag_len > 16) {
        secure_zero(out, len);
        return false;
    }
#if defined(__x86_64__)
    if (path_ == Path::avx512) return gcm_avx512::open(key_, nonce, aad, aad_len, in, out, len, tag, tag_len);
    if (path_ == Path::avx2) return gcm_avx2::open(key_, nonce, aad, aad_len, in, out, len, tag, tag_len);
#endif
    secure_zero(out, len);
    return false;
}

}  // namespace espvpn
