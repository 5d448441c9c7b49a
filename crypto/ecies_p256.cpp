#include "crypto/ecies_p256.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gmp.h>
#include <nettle/base64.h>
#include <nettle/ecc-curve.h>
#include <nettle/ecc.h>
#include <nettle/gcm.h>
#include <nettle/hkdf.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include <array>
#include <cstring>

namespace espvpn::crypto {

namespace {

// SubjectPublicKeyInfo DER of a P-256 key up to the uncompressed point: SEQUENCE { SEQUENCE {
// id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }.
constexpr std::array<std::uint8_t, 26> kSpkiPrefix = {0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48,
                                                      0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48,
                                                      0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00};
constexpr std::size_t kCoord = 32;

void rnd_func(void*, std::size_t length, std::uint8_t* dst) {
    // On failure the scalar is unusable; generate() checks the result is not zero.
    if (gnutls_rnd(GNUTLS_RND_KEY, dst, length) != 0) std::memset(dst, 0, length);
}

// mpz <-> 32 big-endian bytes.
void to_bytes(const mpz_t v, std::uint8_t* out) {
    std::memset(out, 0, kCoord);
    std::size_t n = (mpz_sizeinbase(v, 2) + 7) / 8;
    if (n > kCoord) return;
    mpz_export(out + (kCoord - n), nullptr, 1, 1, 1, 0, v);
}

}  // namespace

struct EciesP256Key::Impl {
    ecc_scalar priv;
    ecc_point pub;
    Impl() {
        ecc_scalar_init(&priv, nettle_get_secp_256r1());
        ecc_point_init(&pub, nettle_get_secp_256r1());
    }
    ~Impl() {
        ecc_scalar_clear(&priv);
        ecc_point_clear(&pub);
    }
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
};

EciesP256Key::EciesP256Key(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EciesP256Key::EciesP256Key(EciesP256Key&&) noexcept = default;
EciesP256Key& EciesP256Key::operator=(EciesP256Key&&) noexcept = default;
EciesP256Key::~EciesP256Key() = default;

Result<EciesP256Key> EciesP256Key::generate() {
    auto impl = std::make_unique<Impl>();
    ecc_scalar_random(&impl->priv, nullptr, rnd_func);
    mpz_t z;
    mpz_init(z);
    ecc_scalar_get(&impl->priv, z);
    bool zero = mpz_sgn(z) == 0;
    mpz_clear(z);
    if (zero) return make_error("no random bytes for the STRAP key");
    ecc_point_mul_g(&impl->pub, &impl->priv);
    return EciesP256Key(std::move(impl));
}

Result<EciesP256Key> EciesP256Key::from_scalar(std::span<const std::uint8_t> scalar) {
    if (scalar.size() != kCoord) return make_error("a P-256 scalar is 32 bytes");
    auto impl = std::make_unique<Impl>();
    mpz_t z;
    mpz_init(z);
    mpz_import(z, scalar.size(), 1, 1, 1, 0, scalar.data());
    int ok = ecc_scalar_set(&impl->priv, z);
    mpz_clear(z);
    if (!ok) return make_error("the scalar is not a P-256 private key");
    ecc_point_mul_g(&impl->pub, &impl->priv);
    return EciesP256Key(std::move(impl));
}

std::string EciesP256Key::public_key_base64() const {
    std::array<std::uint8_t, kSpkiPrefix.size() + 1 + 2 * kCoord> der{};
    std::memcpy(der.data(), kSpkiPrefix.data(), kSpkiPrefix.size());
    der[kSpkiPrefix.size()] = 0x04;
    mpz_t x, y;
    mpz_init(x);
    mpz_init(y);
    ecc_point_get(&impl_->pub, x, y);
    to_bytes(x, der.data() + kSpkiPrefix.size() + 1);
    to_bytes(y, der.data() + kSpkiPrefix.size() + 1 + kCoord);
    mpz_clear(x);
    mpz_clear(y);
    std::string out(BASE64_ENCODE_RAW_LENGTH(der.size()), '\0');
    base64_encode_raw(reinterpret_cast<char*>(out.data()), der.size(), der.data());
    return out;
}

Result<Secret> EciesP256Key::open(std::span<const std::uint8_t> peer_spki, std::span<const std::uint8_t> iv,
                                  std::span<const std::uint8_t> tag, std::span<const std::uint8_t> ciphertext) const {
    if (peer_spki.size() != kSpkiPrefix.size() + 1 + 2 * kCoord ||
        std::memcmp(peer_spki.data(), kSpkiPrefix.data(), kSpkiPrefix.size()) != 0 ||
        peer_spki[kSpkiPrefix.size()] != 0x04)
        return make_error("the server's key is not an uncompressed P-256 public key");
    if (iv.size() != GCM_IV_SIZE) return make_error("the IV is not 12 bytes");
    if (tag.size() < 12 || tag.size() > GCM_DIGEST_SIZE) return make_error("the GCM tag is not 12 to 16 bytes");

    ecc_point peer, shared;
    ecc_point_init(&peer, nettle_get_secp_256r1());
    ecc_point_init(&shared, nettle_get_secp_256r1());
    mpz_t x, y;
    mpz_init(x);
    mpz_init(y);
    const std::uint8_t* point = peer_spki.data() + kSpkiPrefix.size() + 1;
    mpz_import(x, kCoord, 1, 1, 1, 0, point);
    mpz_import(y, kCoord, 1, 1, 1, 0, point + kCoord);
    int on_curve = ecc_point_set(&peer, x, y);
    Secret z(kCoord);
    if (on_curve) {
        ecc_point_mul(&shared, &impl_->priv, &peer);
        ecc_point_get(&shared, x, nullptr);
        to_bytes(x, z.reveal_mutable().data());
    }
    mpz_clear(x);
    mpz_clear(y);
    ecc_point_clear(&peer);
    ecc_point_clear(&shared);
    if (!on_curve) return make_error("the server's key is not a point on P-256");

    // HKDF-SHA256: extract with an all-zero salt (RFC 5869's "not provided"), expand with "AC_ECIES".
    Secret prk(SHA256_DIGEST_SIZE), key(32);
    hmac_sha256_ctx h;
    const std::uint8_t zero_salt[SHA256_DIGEST_SIZE] = {};
    hmac_sha256_set_key(&h, sizeof zero_salt, zero_salt);
    hkdf_extract(&h, reinterpret_cast<nettle_hash_update_func*>(hmac_sha256_update),
                 reinterpret_cast<nettle_hash_digest_func*>(hmac_sha256_digest), SHA256_DIGEST_SIZE, z.size(),
                 z.reveal().data(), prk.reveal_mutable().data());
    hmac_sha256_set_key(&h, prk.size(), prk.reveal().data());
    static constexpr char kInfo[] = "AC_ECIES";
    hkdf_expand(&h, reinterpret_cast<nettle_hash_update_func*>(hmac_sha256_update),
                reinterpret_cast<nettle_hash_digest_func*>(hmac_sha256_digest), SHA256_DIGEST_SIZE, sizeof kInfo - 1,
                reinterpret_cast<const std::uint8_t*>(kInfo), key.size(), key.reveal_mutable().data());
    secure_zero(&h, sizeof h);  // HMAC state keyed with the PRK: a memset here may be dropped as a dead store

    gcm_aes256_ctx g;
    gcm_aes256_set_key(&g, key.reveal().data());
    gcm_aes256_set_iv(&g, iv.size(), iv.data());
    Secret plain(ciphertext.size());
    gcm_aes256_decrypt(&g, ciphertext.size(), plain.reveal_mutable().data(), ciphertext.data());
    std::uint8_t digest[GCM_DIGEST_SIZE];
    gcm_aes256_digest(&g, tag.size(), digest);
    secure_zero(&g, sizeof g);  // the AES-256 key schedule
    if (!memeql_sec(digest, tag.data(), tag.size())) return make_error("the token does not decrypt (GCM tag mismatch)");
    return plain;
}

}  // namespace espvpn::crypto
