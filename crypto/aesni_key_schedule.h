// AES encryption key schedule with AES-NI (FIPS-197 key expansion through AESKEYGENASSIST,
// as Intel's AES-NI white paper of 2010 lays it out). Internal to crypto/: the AES-CBC lanes
// and the VAES AES-GCM start from these round keys. Call only where the CPU has AES-NI.
// Every function is static (one copy per translation unit): the AES-GCM file is compiled
// for AVX-512, and a shared inline copy from it could end up in the AES-NI-only code.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#define ESPVPN_AESNI_TARGET __attribute__((target("aes,sse4.1")))

namespace espvpn::aesni {

ESPVPN_AESNI_TARGET static inline __m128i fold_key(__m128i key, __m128i assist) {
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    return _mm_xor_si128(key, assist);
}

template <int Rcon>
ESPVPN_AESNI_TARGET static inline __m128i next128(__m128i prev) {
    return fold_key(prev, _mm_shuffle_epi32(_mm_aeskeygenassist_si128(prev, Rcon), 0xff));
}

ESPVPN_AESNI_TARGET static inline void expand128(const std::uint8_t* key, __m128i* rk) {
    rk[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
    rk[1] = next128<0x01>(rk[0]);
    rk[2] = next128<0x02>(rk[1]);
    rk[3] = next128<0x04>(rk[2]);
    rk[4] = next128<0x08>(rk[3]);
    rk[5] = next128<0x10>(rk[4]);
    rk[6] = next128<0x20>(rk[5]);
    rk[7] = next128<0x40>(rk[6]);
    rk[8] = next128<0x80>(rk[7]);
    rk[9] = next128<0x1b>(rk[8]);
    rk[10] = next128<0x36>(rk[9]);
}

// AES-256: even round keys fold in RotWord+SubWord+Rcon of the previous key's
// last word, odd ones SubWord alone.
template <int Rcon>
ESPVPN_AESNI_TARGET static inline void next256(__m128i* rk, int i) {
    rk[i] = fold_key(rk[i - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[i - 1], Rcon), 0xff));
    if (i + 1 < 15)
        rk[i + 1] = fold_key(rk[i - 1], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[i], 0), 0xaa));
}

ESPVPN_AESNI_TARGET static inline void expand256(const std::uint8_t* key, __m128i* rk) {
    rk[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
    rk[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key + 16));
    next256<0x01>(rk, 2);
    next256<0x02>(rk, 4);
    next256<0x04>(rk, 6);
    next256<0x08>(rk, 8);
    next256<0x10>(rk, 10);
    next256<0x20>(rk, 12);
    next256<0x40>(rk, 14);
}

// key_len 16 (11 round keys into rk) or 32 (15).
ESPVPN_AESNI_TARGET static inline void expand_key(const std::uint8_t* key, std::size_t key_len, __m128i* rk) {
    if (key_len == 16) expand128(key, rk);
    else expand256(key, rk);
}

}  // namespace espvpn::aesni
#endif
