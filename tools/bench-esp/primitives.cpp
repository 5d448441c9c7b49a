#include "tools/bench-esp/primitives.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nettle/aes.h>
#include <nettle/cbc.h>
#include <nettle/gcm.h>
#include <nettle/hmac.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace espvpn::bench {
namespace {

// Fixed, arbitrary keys: the benchmark measures speed, not secrecy.
const std::array<std::uint8_t, 32> kKey = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                           12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                           23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

// CBC works on whole blocks: a payload of n bytes costs ceil(n/16) blocks (ESP pads it).
std::size_t cbc_blocks(std::size_t n) { return (n + 15) / 16 * 16; }

void check(int rc, const char* what) {
    if (rc < 0) throw std::runtime_error(std::string(what) + ": " + gnutls_strerror(rc));
}

gnutls_datum_t key_datum(std::size_t n) { return {const_cast<std::uint8_t*>(kKey.data()), static_cast<unsigned>(n)}; }

struct GnutlsAead {
    gnutls_aead_cipher_hd_t h{};
    explicit GnutlsAead(gnutls_cipher_algorithm_t alg, std::size_t key_size) {
        gnutls_datum_t k = key_datum(key_size);
        check(gnutls_aead_cipher_init(&h, alg, &k), "gnutls_aead_cipher_init");
    }
    void encrypt(std::uint8_t* d, std::size_t n) {
        std::array<std::uint8_t, 12> nonce{};
        std::array<std::uint8_t, 8> aad{};
        std::array<std::uint8_t, 16> tag{};
        giovec_t a{aad.data(), aad.size()}, p{d, n};
        std::size_t tag_size = tag.size();
        check(gnutls_aead_cipher_encryptv2(h, nonce.data(), nonce.size(), &a, 1, &p, 1, tag.data(), &tag_size),
              "gnutls_aead_cipher_encryptv2");
    }
};

struct GnutlsCbc {
    gnutls_cipher_hd_t h{};
    GnutlsCbc() {
        gnutls_datum_t k = key_datum(16);
        std::array<std::uint8_t, 16> iv{};
        gnutls_datum_t v{iv.data(), 16};
        check(gnutls_cipher_init(&h, GNUTLS_CIPHER_AES_128_CBC, &k, &v), "gnutls_cipher_init");
    }
    void encrypt(std::uint8_t* d, std::size_t n) {
        n = cbc_blocks(n);
        std::array<std::uint8_t, 16> iv{};
        gnutls_cipher_set_iv(h, iv.data(), iv.size());
        check(gnutls_cipher_encrypt2(h, d, n, d, n), "gnutls_cipher_encrypt2");
    }
    void decrypt(std::uint8_t* d, std::size_t n) {
        n = cbc_blocks(n);
        std::array<std::uint8_t, 16> iv{};
        gnutls_cipher_set_iv(h, iv.data(), iv.size());
        check(gnutls_cipher_decrypt2(h, d, n, d, n), "gnutls_cipher_decrypt2");
    }
};

struct GnutlsHmac {
    gnutls_hmac_hd_t h{};
    explicit GnutlsHmac(gnutls_mac_algorithm_t alg, std::size_t key_size) {
        check(gnutls_hmac_init(&h, alg, kKey.data(), key_size), "gnutls_hmac_init");
    }
    void mac(const std::uint8_t* d, std::size_t n) {
        std::array<std::uint8_t, 32> out{};
        gnutls_hmac(h, d, n);
        gnutls_hmac_output(h, out.data());  // also resets to the keyed state
    }
};

struct NettleGcm {
    gcm_aes128_ctx ctx{};
    NettleGcm() { gcm_aes128_set_key(&ctx, kKey.data()); }
    void encrypt(std::uint8_t* d, std::size_t n) {
        std::array<std::uint8_t, 12> nonce{};
        std::array<std::uint8_t, 8> aad{};
        std::array<std::uint8_t, 16> tag{};
        gcm_aes128_set_iv(&ctx, nonce.size(), nonce.data());
        gcm_aes128_update(&ctx, aad.size(), aad.data());
        gcm_aes128_encrypt(&ctx, n, d, d);
        gcm_aes128_digest(&ctx, tag.size(), tag.data());
    }
};

struct NettleCbc {
    aes128_ctx enc{}, dec{};
    NettleCbc() {
        aes128_set_encrypt_key(&enc, kKey.data());
        aes128_invert_key(&dec, &enc);
    }
    void encrypt(std::uint8_t* d, std::size_t n) {
        n = cbc_blocks(n);
        std::array<std::uint8_t, 16> iv{};
        cbc_aes128_encrypt(&enc, iv.data(), n, d, d);
    }
    void decrypt(std::uint8_t* d, std::size_t n) {
        n = cbc_blocks(n);
        std::array<std::uint8_t, 16> iv{};
        cbc_decrypt(&dec, reinterpret_cast<nettle_cipher_func*>(aes128_decrypt), 16, iv.data(), n, d, d);
    }
};

// Nettle's HMAC context keeps the keyed inner/outer states; digest() restores the
// inner one, so a context set up once is reused for every packet.
template <class Ctx, void (*SetKey)(Ctx*, std::size_t, const std::uint8_t*),
          void (*Update)(Ctx*, std::size_t, const std::uint8_t*), void (*Digest)(Ctx*, std::size_t, std::uint8_t*)>
struct NettleHmac {
    Ctx ctx{};
    explicit NettleHmac(std::size_t key_size) { SetKey(&ctx, key_size, kKey.data()); }
    void mac(const std::uint8_t* d, std::size_t n) {
        std::array<std::uint8_t, 32> out{};
        Update(&ctx, n, d);
        Digest(&ctx, 12, out.data());
    }
};
using NettleSha1 = NettleHmac<hmac_sha1_ctx, nettle_hmac_sha1_set_key, nettle_hmac_sha1_update, nettle_hmac_sha1_digest>;
using NettleSha256 =
    NettleHmac<hmac_sha256_ctx, nettle_hmac_sha256_set_key, nettle_hmac_sha256_update, nettle_hmac_sha256_digest>;
using NettleMd5 = NettleHmac<hmac_md5_ctx, nettle_hmac_md5_set_key, nettle_hmac_md5_update, nettle_hmac_md5_digest>;

template <class T>
T& instance() {
    static T t;
    return t;
}

GnutlsAead& gnutls_gcm128() {
    static GnutlsAead a(GNUTLS_CIPHER_AES_128_GCM, 16);
    return a;
}
GnutlsHmac& gnutls_sha1() {
    static GnutlsHmac h(GNUTLS_MAC_SHA1, 20);
    return h;
}
GnutlsHmac& gnutls_sha256() {
    static GnutlsHmac h(GNUTLS_MAC_SHA256, 32);
    return h;
}
GnutlsHmac& gnutls_md5() {
    static GnutlsHmac h(GNUTLS_MAC_MD5, 16);
    return h;
}
NettleSha1& nettle_sha1() {
    static NettleSha1 h(20);
    return h;
}
NettleSha256& nettle_sha256() {
    static NettleSha256 h(32);
    return h;
}
NettleMd5& nettle_md5() {
    static NettleMd5 h(16);
    return h;
}

}  // namespace

std::vector<PrimitiveCase> primitive_cases() {
    return {
        {"AES-128-GCM encrypt", "GnuTLS", [](std::uint8_t* d, std::size_t n) { gnutls_gcm128().encrypt(d, n); }},
        {"AES-128-GCM encrypt", "Nettle", [](std::uint8_t* d, std::size_t n) { instance<NettleGcm>().encrypt(d, n); }},
        {"AES-128-CBC encrypt", "GnuTLS", [](std::uint8_t* d, std::size_t n) { instance<GnutlsCbc>().encrypt(d, n); }},
        {"AES-128-CBC encrypt", "Nettle", [](std::uint8_t* d, std::size_t n) { instance<NettleCbc>().encrypt(d, n); }},
        {"AES-128-CBC decrypt", "GnuTLS", [](std::uint8_t* d, std::size_t n) { instance<GnutlsCbc>().decrypt(d, n); }},
        {"AES-128-CBC decrypt", "Nettle", [](std::uint8_t* d, std::size_t n) { instance<NettleCbc>().decrypt(d, n); }},
        {"HMAC-SHA1", "GnuTLS", [](std::uint8_t* d, std::size_t n) { gnutls_sha1().mac(d, n); }},
        {"HMAC-SHA1", "Nettle", [](std::uint8_t* d, std::size_t n) { nettle_sha1().mac(d, n); }},
        {"HMAC-SHA256", "GnuTLS", [](std::uint8_t* d, std::size_t n) { gnutls_sha256().mac(d, n); }},
        {"HMAC-SHA256", "Nettle", [](std::uint8_t* d, std::size_t n) { nettle_sha256().mac(d, n); }},
        {"HMAC-MD5", "GnuTLS", [](std::uint8_t* d, std::size_t n) { gnutls_md5().mac(d, n); }},
        {"HMAC-MD5", "Nettle", [](std::uint8_t* d, std::size_t n) { nettle_md5().mac(d, n); }},
        {"CBC IV (16 B, per packet)", "GnuTLS rnd(NONCE)",
         [](std::uint8_t* d, std::size_t) { check(gnutls_rnd(GNUTLS_RND_NONCE, d, 16), "gnutls_rnd"); }},
        {"CBC IV (16 B, per packet)", "Nettle AES(counter)",
         [](std::uint8_t* d, std::size_t) {
             static std::uint64_t counter = 0;
             std::array<std::uint8_t, 16> block{};
             ++counter;
             std::memcpy(block.data(), &counter, sizeof counter);
             aes128_encrypt(&instance<NettleCbc>().enc, 16, d, block.data());
         }},
    };
}

void raw_gcm128_encrypt(std::uint8_t* data, std::size_t size) { gnutls_gcm128().encrypt(data, size); }

void raw_cbc128_sha1(std::uint8_t* data, std::size_t size) {
    instance<NettleCbc>().encrypt(data, size);
    gnutls_sha1().mac(data, size);
}

}  // namespace espvpn::bench
