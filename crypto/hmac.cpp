#include "crypto/hmac.h"

#include "crypto/secret.h"

namespace espvpn {

Hmac::Hmac(EspIntegrity alg, std::span<const std::uint8_t> key) {
    switch (alg) {
        case EspIntegrity::hmac_sha1_96:
            hmac_sha1_set_key(&ctx_.emplace<hmac_sha1_ctx>(), key.size(), key.data());
            break;
        case EspIntegrity::hmac_sha256_128:
            hmac_sha256_set_key(&ctx_.emplace<hmac_sha256_ctx>(), key.size(), key.data());
            break;
        case EspIntegrity::hmac_md5_96:
            hmac_md5_set_key(&ctx_.emplace<hmac_md5_ctx>(), key.size(), key.data());
            break;
        case EspIntegrity::none: break;
    }
}

Hmac::~Hmac() { secure_zero(&ctx_, sizeof ctx_); }

std::size_t Hmac::digest_size(EspIntegrity alg) {
    switch (alg) {
        case EspIntegrity::hmac_sha1_96: return SHA1_DIGEST_SIZE;
        case EspIntegrity::hmac_sha256_128: return SHA256_DIGEST_SIZE;
        case EspIntegrity::hmac_md5_96: return MD5_DIGEST_SIZE;
        case EspIntegrity::none: break;
    }
    return 0;
}

// Nettle's digest() finishes the inner hash, runs the outer one, then restores the
// keyed inner state: no per-message key processing.
void Hmac::compute(std::span<const std::uint8_t> data, std::uint8_t* out, std::size_t out_len) noexcept {
    if (auto* c = std::get_if<hmac_sha1_ctx>(&ctx_)) {
        hmac_sha1_update(c, data.size(), data.data());
        hmac_sha1_digest(c, out_len, out);
    } else if (auto* c2 = std::get_if<hmac_sha256_ctx>(&ctx_)) {
        hmac_sha256_update(c2, data.size(), data.data());
        hmac_sha256_digest(c2, out_len, out);
    } else if (auto* c3 = std::get_if<hmac_md5_ctx>(&ctx_)) {
        hmac_md5_update(c3, data.size(), data.data());
        hmac_md5_digest(c3, out_len, out);
    }
}

}  // namespace espvpn
