#include "crypto/suites.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <array>
#include <cstdint>

namespace espvpn {

const std::vector<EspSuiteName>& known_esp_suites() {
    static const std::vector<EspSuiteName> suites = {
        {"aes-128-gcm", ""},      {"aes-256-gcm", ""},
        {"aes-128-cbc", "sha1"},  {"aes-256-cbc", "sha1"},
        {"aes-128-cbc", "sha256"}, {"aes-256-cbc", "sha256"},
        {"aes-128-cbc", "md5"},   {"aes-256-cbc", "md5"},
    };
    return suites;
}

static gnutls_cipher_algorithm_t cipher_of(std::string_view enc) {
    if (enc == "aes-128-cbc") return GNUTLS_CIPHER_AES_128_CBC;
    if (enc == "aes-256-cbc") return GNUTLS_CIPHER_AES_256_CBC;
    if (enc == "aes-128-gcm") return GNUTLS_CIPHER_AES_128_GCM;
    if (enc == "aes-256-gcm") return GNUTLS_CIPHER_AES_256_GCM;
    return GNUTLS_CIPHER_UNKNOWN;
}

static gnutls_mac_algorithm_t mac_of(std::string_view auth) {
    if (auth == "sha1") return GNUTLS_MAC_SHA1;
    if (auth == "sha256") return GNUTLS_MAC_SHA256;
    if (auth == "md5") return GNUTLS_MAC_MD5;
    return GNUTLS_MAC_UNKNOWN;
}

bool suite_available(const EspSuiteName& suite) {
    gnutls_cipher_algorithm_t c = cipher_of(suite.enc);
    if (c == GNUTLS_CIPHER_UNKNOWN) return false;
    std::array<std::uint8_t, 32> key{};
    std::array<std::uint8_t, 16> iv{};
    gnutls_datum_t k{key.data(), static_cast<unsigned>(gnutls_cipher_get_key_size(c))};
    gnutls_datum_t v{iv.data(), static_cast<unsigned>(gnutls_cipher_get_iv_size(c))};
    gnutls_cipher_hd_t h;
    if (gnutls_cipher_init(&h, c, &k, &v) < 0) return false;
    gnutls_cipher_deinit(h);
    if (suite.auth.empty()) return true;
    gnutls_mac_algorithm_t m = mac_of(suite.auth);
    if (m == GNUTLS_MAC_UNKNOWN) return false;
    gnutls_hmac_hd_t hm;
    if (gnutls_hmac_init(&hm, m, key.data(), 20) < 0) return false;
    gnutls_hmac_deinit(hm, nullptr);
    return true;
}

}  // namespace espvpn
