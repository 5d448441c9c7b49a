// HMAC-SHA1/SHA256/MD5 for ESP integrity, with the keyed inner and outer states
// computed once per key: each message then costs only its own compression rounds.
// Library per algorithm by measurement (tools/bench-esp, docs/PERFORMANCE.md):
// SHA-1 and SHA-256 through GnuTLS (5-9% faster from 512 bytes up), MD5 through Nettle
// (a tie; no handle needed).
#pragma once

#include <gnutls/crypto.h>
#include <nettle/hmac.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "crypto/esp_transform.h"
#include "protocols/base/result.h"

namespace espvpn {

class Hmac {
public:
    Hmac() = default;
    Hmac(const Hmac&) = delete;
    Hmac& operator=(const Hmac&) = delete;
    ~Hmac();

    // alg must not be EspIntegrity::none. Call once.
    Status init(EspIntegrity alg, std::span<const std::uint8_t> key);

    static std::size_t digest_size(EspIntegrity alg);  // untruncated: 20, 32, 16

    // Writes the first out_len (<= digest_size) bytes of HMAC(key, data); the context is
    // ready for the next message afterwards.
    void compute(std::span<const std::uint8_t> data, std::uint8_t* out, std::size_t out_len) noexcept;

private:
    EspIntegrity alg_ = EspIntegrity::none;
    gnutls_hmac_hd_t gnutls_ = nullptr;  // SHA-1, SHA-256
    hmac_md5_ctx md5_{};                 // MD5
};

}  // namespace espvpn
