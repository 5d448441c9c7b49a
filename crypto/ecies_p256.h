// The P-256 ECIES of Cisco's STRAP (Secure Client 5, as openconnect 9.x speaks it): the
// client's key pair, its public key as base64 SubjectPublicKeyInfo DER (the
// X-AnyConnect-STRAP-Pubkey header), and the opening of what a server encrypted to it:
// ECDH with the server's ephemeral key, HKDF-SHA256 (no salt, info "AC_ECIES") to an
// AES-256-GCM key, a 12-byte IV and a 12-byte tag.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::crypto {

class EciesP256Key {
public:
    // A fresh key pair from GnuTLS's key-grade random source.
    static Result<EciesP256Key> generate();
    // The key of a given 32-byte big-endian scalar (tests).
    static Result<EciesP256Key> from_scalar(std::span<const std::uint8_t> scalar);

    EciesP256Key(EciesP256Key&&) noexcept;
    EciesP256Key& operator=(EciesP256Key&&) noexcept;
    ~EciesP256Key();

    // base64 of the SubjectPublicKeyInfo DER (id-ecPublicKey, prime256v1, uncompressed point).
    std::string public_key_base64() const;

    // Decrypts `ciphertext` sent by the holder of `peer_spki` (SubjectPublicKeyInfo DER of a
    // P-256 point). Errors: a key that is not an uncompressed P-256 point on the curve, sizes,
    // a tag that does not match.
    Result<Secret> open(std::span<const std::uint8_t> peer_spki, std::span<const std::uint8_t> iv,
                        std::span<const std::uint8_t> tag, std::span<const std::uint8_t> ciphertext) const;

private:
    struct Impl;
    explicit EciesP256Key(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace espvpn::crypto
