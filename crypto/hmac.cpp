#include "crypto/hmac.h"

#include <array>
#include <cstring>
#include <string>

#include "crypto/secret.h"

namespace espvpn {

Status Hmac::init(EspIntegrity alg, std::span<const std::uint8_t> key) {
    alg_ = alg;
    if (alg == EspIntegrity::hmac_md5_96) {
        hmac_md5_set_key(&md5_, key.size(), key.data());
        return {};
    }
    if (alg == EspIntegrity::none) return make_error("HMAC needs an integrity algorithm");
    const gnutls_mac_algorithm_t m = alg == EspIntegrity::hmac_sha1_96 ? GNUTLS_MAC_SHA1 : GNUTLS_MAC_SHA256;
    int rc = gnutls_hmac_init(&gnutls_, m, key.data(), key.size());
    if (rc < 0) {
        gnutls_ = nullptr;
        return make_error(std::string("gnutls_hmac_init failed: ") + gnutls_strerror(rc));
    }
    return {};
}

Hmac::~Hmac() {
    if (gnutls_) gnutls_hmac_deinit(gnutls_, nullptr);
    secure_zero(&md5_, sizeof md5_);
}

std::size_t Hmac::digest_size(EspIntegrity alg) {
    switch (alg) {
        case EspIntegrity::hmac_sha1_96: return SHA1_DIGEST_SIZE;
        case EspIntegrity::hmac_sha256_128: return SHA256_DIGEST_SIZE;
        case EspIntegrity::hmac_md5_96: return MD5_DIGEST_SIZE;
        case EspIntegrity::none: break;
    }
    return 0;
}

// Both libraries finish the inner hash, run the outer one and then restore the keyed
// inner state (gnutls_hmac_output "resets"): no per-message key processing.
void Hmac::compute(std::span<const std::uint8_t> data, std::uint8_t* out, std::size_t out_len) noexcept {
    if (alg_ == EspIntegrity::hmac_md5_96) {
        hmac_md5_update(&md5_, data.size(), data.data());
        hmac_md5_digest(&md5_, out_len, out);
        return;
    }
    if (!gnutls_) return;
    std::array<std::uint8_t, SHA256_DIGEST_SIZE> full;
    gnutls_hmac(gnutls_, data.data(), data.size());
    gnutls_hmac_output(gnutls_, full.data());
    std::memcpy(out, full.data(), out_len);
    secure_zero(full.data(), full.size());
}

}  // namespace espvpn
