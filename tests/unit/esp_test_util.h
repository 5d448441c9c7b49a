// Helpers shared by the ESP tests: hex, and independent reference computations (via
// GnuTLS's one-shot APIs, not the code under test).
#pragma once

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "crypto/esp_transform.h"
#include "crypto/secret.h"

namespace espvpn::test {

using Bytes = std::vector<std::uint8_t>;

// n bytes from a seeded generator (tests repeat exactly).
inline Bytes random_bytes(std::mt19937& rng, std::size_t n) {
    Bytes b(n);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    return b;
}

// GnuTLS's one-shot AEAD (AES-GCM, ChaCha20-Poly1305): ciphertext ‖ 16-byte tag.
inline Bytes reference_aead_seal(gnutls_cipher_algorithm_t c, const Bytes& key, const Bytes& nonce, const Bytes& aad,
                                 const Bytes& text) {
    gnutls_aead_cipher_hd_t h = nullptr;
    gnutls_datum_t kd{const_cast<std::uint8_t*>(key.data()), static_cast<unsigned>(key.size())};
    if (gnutls_aead_cipher_init(&h, c, &kd) < 0) throw std::runtime_error("gnutls_aead_cipher_init");
    Bytes out(text.size() + 16);
    std::size_t out_len = out.size();
    const int rc = gnutls_aead_cipher_encrypt(h, nonce.data(), nonce.size(), aad.data(), aad.size(), 16, text.data(),
                                              text.size(), out.data(), &out_len);
    gnutls_aead_cipher_deinit(h);
    if (rc < 0 || out_len != out.size()) throw std::runtime_error("gnutls_aead_cipher_encrypt");
    return out;
}

inline Bytes hex(std::string_view h) {
    Bytes out;
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw std::invalid_argument("bad hex in test vector");
    };
    std::size_t i = 0;
    while (i < h.size()) {
        if (h[i] == ' ' || h[i] == '\n') {
            ++i;
            continue;
        }
        out.push_back(static_cast<std::uint8_t>(nib(h[i]) << 4 | nib(h[i + 1])));
        i += 2;
    }
    return out;
}

inline Bytes concat(std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

inline Bytes be32(std::uint32_t v) {
    return {static_cast<std::uint8_t>(v >> 24), static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 8),
            static_cast<std::uint8_t>(v)};
}

// Reference HMAC through gnutls_hmac_fast, truncated to n bytes.
inline Bytes reference_hmac(EspIntegrity alg, const Bytes& key, const Bytes& data, std::size_t n) {
    gnutls_mac_algorithm_t m = alg == EspIntegrity::hmac_sha1_96      ? GNUTLS_MAC_SHA1
                               : alg == EspIntegrity::hmac_sha256_128 ? GNUTLS_MAC_SHA256
                                                                      : GNUTLS_MAC_MD5;
    Bytes out(32);
    if (gnutls_hmac_fast(m, key.data(), key.size(), data.data(), data.size(), out.data()) < 0)
        throw std::runtime_error("gnutls_hmac_fast");
    out.resize(n);
    return out;
}

// Deterministic test keys of the suite's sizes.
inline EspSaKeys test_keys(const EspSuite& suite, std::uint8_t seed = 1) {
    Secret e(suite.enc_key_size());
    for (std::size_t i = 0; i < e.size(); ++i) e.reveal_mutable()[i] = static_cast<std::uint8_t>(seed + i * 7);
    Secret a(suite.auth_key_size());
    for (std::size_t i = 0; i < a.size(); ++i) a.reveal_mutable()[i] = static_cast<std::uint8_t>(seed * 3 + i * 11);
    auto k = EspSaKeys::create(suite, std::move(e), std::move(a));
    if (!k) throw std::runtime_error(k.error().message);
    return std::move(*k);
}

inline std::vector<EspSuite> all_suites() {
    std::vector<EspSuite> out;
    for (auto c : {EspCipher::aes128_cbc, EspCipher::aes256_cbc})
        for (auto i : {EspIntegrity::hmac_sha1_96, EspIntegrity::hmac_sha256_128, EspIntegrity::hmac_md5_96})
            out.push_back({c, i});
    out.push_back({EspCipher::aes128_gcm, EspIntegrity::none});
    out.push_back({EspCipher::aes256_gcm, EspIntegrity::none});
    return out;
}

}  // namespace espvpn::test
