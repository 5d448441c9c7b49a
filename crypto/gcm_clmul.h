// Internal to crypto/: the 128-bit GHASH arithmetic and the key set-up that both vector
// AES-GCM paths share (crypto/aes_gcm_avx2.cpp, crypto/aes_gcm_avx512.cpp, set up by
// crypto/aes_gcm.cpp). Call only where the CPU has AES-NI and PCLMULQDQ.
//
// GHASH in the bit-reflected form of Intel's carry-less multiplication white paper
// (Gueron and Kounavis, 2014 revision): each block is byte-reversed, so a 128-bit integer
// holds the polynomial with x^0 in its top bit. A carry-less product of two such values is
// the reflected product times x; storing the powers of H as H^k * x^-1 cancels that x, and
// the 256-bit product is reduced modulo x^128 + x^7 + x^2 + x + 1 by two folds of 64 bits,
// each one carry-less multiply by 0xc200000000000000. The vector paths multiply many
// blocks by H^16 .. H^1, sum the unreduced products and reduce once.
//
// Every function is static (one copy per translation unit), as in aesni_key_schedule.h: the
// vector files are compiled for AVX2 or AVX-512, and a shared inline copy from one of them
// must not end up in code that runs on other CPUs.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "crypto/aes_gcm.h"
#include "crypto/aesni_key_schedule.h"

#define ESPVPN_GCM_TARGET __attribute__((target("aes,pclmul,sse4.1")))

namespace espvpn::gcm_clmul {

ESPVPN_GCM_TARGET static inline __m128i reverse_mask() {
    return _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
ESPVPN_GCM_TARGET static inline __m128i reverse(__m128i x) { return _mm_shuffle_epi8(x, reverse_mask()); }

// The folding constant: x^63 + x^62 + x^57 in the high half (the fold), 1 in the low half
// (with it, H * x^-1).
ESPVPN_GCM_TARGET static inline __m128i gf_poly() {
    return _mm_set_epi64x(static_cast<long long>(0xc200000000000000ULL), 1);
}

// lo + mi * x^64 + hi * x^128 (reflected) reduced to 128 bits.
ESPVPN_GCM_TARGET static inline __m128i reduce(__m128i lo, __m128i mi, __m128i hi) {
    const __m128i poly = gf_poly();
    __m128i t = _mm_clmulepi64_si128(lo, poly, 0x10);  // lo's low half times the fold constant
    mi = _mm_xor_si128(mi, _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), t));
    t = _mm_clmulepi64_si128(mi, poly, 0x10);
    return _mm_xor_si128(hi, _mm_xor_si128(_mm_shuffle_epi32(mi, 0x4e), t));
}

ESPVPN_GCM_TARGET static inline __m128i gf_mul(__m128i a, __m128i b) {
    const __m128i lo = _mm_clmulepi64_si128(a, b, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(a, b, 0x11);
    const __m128i mi = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
    return reduce(lo, mi, hi);
}

// The round keys (each repeated in the four 128-bit lanes, so either path loads its width)
// and H^16 .. H^1 of a 16- or 32-byte key.
ESPVPN_GCM_TARGET static inline void set_key(AesGcm::Key& key, const std::uint8_t* bytes, std::size_t len) {
    __m128i rk[15];
    aesni::expand_key(bytes, len, rk);
    key.rounds = len == 16 ? 10 : 14;
    for (unsigned r = 0; r <= key.rounds; ++r)
        for (int lane = 0; lane < 4; ++lane)
            _mm_store_si128(reinterpret_cast<__m128i*>(key.round_keys[r] + 16 * lane), rk[r]);
    __m128i h = _mm_xor_si128(_mm_setzero_si128(), rk[0]);
    for (unsigned r = 1; r < key.rounds; ++r) h = _mm_aesenc_si128(h, rk[r]);
    h = reverse(_mm_aesenclast_si128(h, rk[key.rounds]));
    // H * x^-1: shift the reflected value left by one; if x^0 was set, add the constant.
    const __m128i carry = _mm_srli_epi64(h, 63);
    __m128i h1 = _mm_or_si128(_mm_slli_epi64(h, 1), _mm_slli_si128(carry, 8));
    const __m128i top = _mm_shuffle_epi32(_mm_srai_epi32(h, 31), 0xff);  // all ones if bit 127 was set
    h1 = _mm_xor_si128(h1, _mm_and_si128(top, gf_poly()));
    __m128i p = h1;
    for (int k = 15; k >= 0; --k) {  // h_powers[k] = H^(16-k)
        _mm_store_si128(reinterpret_cast<__m128i*>(key.h_powers[k]), p);
        p = gf_mul(p, h1);
    }
    for (auto& r : rk) r = _mm_setzero_si128();
    h = h1 = p = _mm_setzero_si128();
}

}  // namespace espvpn::gcm_clmul
#endif
