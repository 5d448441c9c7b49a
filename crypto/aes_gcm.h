// AES-GCM (NIST SP 800-38D) with 512-bit vector AES and carry-less multiply: 16 blocks a step.
//
// GnuTLS 3.7 and Nettle 3.8 stop at 128-bit AES-NI/PCLMUL for GCM. On a CPU with VAES,
// VPCLMULQDQ and AVX-512 one instruction runs four AES rounds or four GHASH products, so
// this does the same work in about a third of the time (docs/PERFORMANCE.md, session 18).
// Where the CPU lacks any of them, available() is false and callers keep GnuTLS.
//
// Usage:
//   if (AesGcm::available()) {
//       AesGcm gcm;
//       gcm.set_key(key, 16);                                   // 16 or 32 bytes
//       gcm.seal(nonce12, aad, aad_len, in, out, len, tag16);   // in == out: in place
//       bool ok = gcm.open(nonce12, aad, aad_len, in, out, len, tag, tag_len);
//   }
// open() checks the tag (its first tag_len bytes, 1..16) in constant time; on a wrong tag it
// returns false and leaves `out` zeroed, never the plaintext of a forgery. The nonce is
// 12 bytes (RFC 4106 ESP, RFC 5288 TLS/DTLS); any text length, any AAD length.
#pragma once

#include <cstddef>
#include <cstdint>

namespace espvpn {

class AesGcm {
public:
    // The CPU has VAES, VPCLMULQDQ, AVX-512 F/BW/VL and the OS saves the 512-bit state;
    // ESPVPN_GCM_VAES=0 turns it off (tests, benchmarks: GnuTLS's GCM instead).
    static bool available();
    // The CPU alone, without the environment override.
    static bool cpu_has_it();

    AesGcm() = default;
    AesGcm(const AesGcm&) = delete;
    AesGcm& operator=(const AesGcm&) = delete;
    ~AesGcm();

    // key_len 16 (AES-128) or 32 (AES-256); false for any other length. Only where
    // cpu_has_it().
    bool set_key(const std::uint8_t* key, std::size_t key_len);

    void seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
              std::uint8_t* out, std::size_t len, std::uint8_t* tag) const;
    bool open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
              std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) const;

    // What the vector code reads: the round keys, each repeated in the four 128-bit lanes,
    // and H^16 .. H^1 (H = AES_K(0)) in the bit order the multiply uses.
    struct Key {
        alignas(64) std::uint8_t round_keys[15][64];
        alignas(64) std::uint8_t h_powers[16][16];
        unsigned rounds;
    };

private:
    Key key_{};
};

}  // namespace espvpn
