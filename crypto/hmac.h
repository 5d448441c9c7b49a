// HMAC-SHA1/SHA256/MD5 for ESP integrity, with the keyed inner and outer states
// computed once per key: each message then costs only its own compression rounds.
#pragma once

#include <nettle/hmac.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "crypto/esp_transform.h"

namespace espvpn {

class Hmac {
public:
    // alg must not be EspIntegrity::none.
    Hmac(EspIntegrity alg, std::span<const std::uint8_t> key);
    Hmac(const Hmac&) = delete;
    Hmac& operator=(const Hmac&) = delete;
    ~Hmac();

    static std::size_t digest_size(EspIntegrity alg);  // untruncated: 20, 32, 16

    // Writes the first out_len (<= digest_size) bytes of HMAC(key, data); the context is
    // ready for the next message afterwards.
    void compute(std::span<const std::uint8_t> data, std::uint8_t* out, std::size_t out_len) noexcept;

private:
    std::variant<std::monostate, hmac_sha1_ctx, hmac_sha256_ctx, hmac_md5_ctx> ctx_;
};

}  // namespace espvpn
