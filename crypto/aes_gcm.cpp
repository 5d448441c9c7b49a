#include "crypto/aes_gcm.h"

#include <cstdlib>

#include "crypto/aes_gcm_avx512.h"
#include "crypto/cpu_features.h"
#include "crypto/secret.h"

namespace espvpn {

bool AesGcm::cpu_has_it() {
    const CpuFeatures f = detect_cpu_features();
    return f.aes_ni && f.pclmul && f.vaes && f.vpclmulqdq && f.avx512;
}

bool AesGcm::available() {
    static const bool cpu = cpu_has_it();
    if (const char* force = std::getenv("ESPVPN_GCM_VAES"); force && *force == '0') return false;
    return cpu;
}

AesGcm::~AesGcm() { secure_zero(&key_, sizeof key_); }

bool AesGcm::set_key(const std::uint8_t* key, std::size_t key_len) {
    if ((key_len != 16 && key_len != 32) || !cpu_has_it()) return false;
#if defined(__x86_64__)
    gcm_avx512::set_key(key_, key, key_len);
    return true;
#else
    return false;
#endif
}

void AesGcm::seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
                  std::uint8_t* out, std::size_t len, std::uint8_t* tag) const {
#if defined(__x86_64__)
    gcm_avx512::seal(key_, nonce, aad, aad_len, in, out, len, tag);
#endif
}

bool AesGcm::open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
                  std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) const {
    if (tag_len == 0 || tag_len > 16) {
        secure_zero(out, len);
        return false;
    }
#if defined(__x86_64__)
    return gcm_avx512::open(key_, nonce, aad, aad_len, in, out, len, tag, tag_len);
#else
    return false;
#endif
}

}  // namespace espvpn
