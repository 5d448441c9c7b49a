// AES-GCM (NIST SP 800-38D) with vector AES and carry-less multiply, 16 blocks a step.
//
// GnuTLS 3.7 and Nettle 3.8 stop at 128-bit AES-NI/PCLMUL for GCM. With VAES and VPCLMULQDQ
// one instruction runs an AES round or a GHASH product of several blocks: two on 256-bit
// registers (AVX2: Intel Core 12th gen and later, AMD Zen 3 and later), four on 512-bit ones
// (AVX-512: Intel Xeon, AMD Zen 4 and later). Each is a Path, chosen at run time from what the
// CPU has (docs/PERFORMANCE.md has the figures); where it has neither, available() is false
// and callers keep GnuTLS.
//
// Usage:
//   if (AesGcm::available()) {
//       AesGcm gcm;
//       gcm.set_key(key, 16, AesGcm::chosen());                 // 16 or 32 bytes
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
    // Which code runs AES-GCM: GnuTLS's, or ours on 256-bit (AVX2) or 512-bit (AVX-512) registers.
    enum class Path { gnutls, avx2, avx512 };

    // The CPU has p's instructions (AES-NI, PCLMULQDQ, VAES, VPCLMULQDQ and AVX2, or AVX-512
    // F/BW/VL) and the OS saves its registers. Always true for gnutls.
    static bool cpu_has(Path p);
    // The widest path the CPU has.
    static Path cpu_best();
    // cpu_best(), narrowed by ESPVPN_GCM_VAES (tests, benchmarks): "0" gnutls, "avx2" at most
    // the 256-bit path, "avx512" (or unset, or anything else) no narrower than the CPU.
    static Path chosen();
    static bool available() { return chosen() != Path::gnutls; }
    // "GnuTLS", "VAES-AVX2", "VAES-AVX-512".
    static const char* name(Path p);

    AesGcm() = default;
    AesGcm(const AesGcm&) = delete;
    AesGcm& operator=(const AesGcm&) = delete;
    ~AesGcm();

    // key_len 16 (AES-128) or 32 (AES-256) for `path`; false for any other length, for
    // Path::gnutls and for a path the CPU lacks (then seal and open must not be called).
    bool set_key(const std::uint8_t* key, std::size_t key_len, Path path = cpu_best());
    Path path() const { return path_; }

    void seal(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
              std::uint8_t* out, std::size_t len, std::uint8_t* tag) const;
    bool open(const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len, const std::uint8_t* in,
              std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) const;

    // What the vector code reads: the round keys, each repeated in the four 128-bit lanes
    // (either path loads its own width), and H^16 .. H^1 (H = AES_K(0)) in the bit order the
    // multiply uses (crypto/gcm_clmul.h).
    struct Key {
        alignas(64) std::uint8_t round_keys[15][64];
        alignas(64) std::uint8_t h_powers[16][16];
        unsigned rounds;
    };

private:
    Key key_{};
    Path path_ = Path::gnutls;
};

}  // namespace espvpn
