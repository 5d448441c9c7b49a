// The 512-bit vector part of crypto/aes_gcm.h, compiled for AVX-512 + VAES + VPCLMULQDQ
// (see crypto/CMakeLists.txt). Nothing here runs unless AesGcm::cpu_has(AesGcm::Path::avx512);
// every function is in an anonymous namespace or in gcm_avx512 and uses no inline library
// code, so no AVX-512 copy of a shared inline function can reach code that runs on other CPUs.
//
// GHASH as crypto/gcm_clmul.h describes it: sixteen blocks (four zmm of four) are multiplied
// by H^16 .. H^1 and summed before one reduction.
#include "crypto/aes_gcm_avx512.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "crypto/gcm_clmul.h"

// GCC 12's AVX-512 intrinsics start from a deliberately undefined register (_mm512_undefined_*)
// and warn about it once inlined (GCC bug 105593); nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace espvpn::gcm_avx512 {
namespace {

using gcm_clmul::gf_mul;
using gcm_clmul::reduce;
using gcm_clmul::reverse;

inline __m512i broadcast4(__m128i x) { return _mm512_broadcast_i32x4(x); }  // into all four lanes
inline __m512i reverse_mask512() { return broadcast4(gcm_clmul::reverse_mask()); }

inline __m128i xor_lanes(__m512i v) {
    const __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

// Products of G groups of four reflected blocks with four powers each, summed unreduced.
struct Sums {
    __m512i lo, mi, hi;
};
inline void accumulate(Sums& s, __m512i b, __m512i h) {
    s.lo = _mm512_xor_si512(s.lo, _mm512_clmulepi64_epi128(b, h, 0x00));
    s.hi = _mm512_xor_si512(s.hi, _mm512_clmulepi64_epi128(b, h, 0x11));
    s.mi = _mm512_ternarylogic_epi64(s.mi, _mm512_clmulepi64_epi128(b, h, 0x01), _mm512_clmulepi64_epi128(b, h, 0x10),
                                     0x96);  // three-way XOR
}
inline __m128i finish(const Sums& s) { return reduce(xor_lanes(s.lo), xor_lanes(s.mi), xor_lanes(s.hi)); }

template <unsigned Rounds>
struct Aes {
    __m512i rk[Rounds + 1];
    explicit Aes(const AesGcm::Key& key) {
        for (unsigned r = 0; r <= Rounds; ++r) rk[r] = _mm512_load_si512(key.round_keys[r]);
    }
    // Four zmm counter blocks (reflected) to keystream.
    template <int G>
    inline void encrypt(__m512i* x) const {
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) x[g] = _mm512_xor_si512(_mm512_shuffle_epi8(x[g], reverse_mask512()), rk[0]);
#pragma GCC unroll 14
        for (unsigned r = 1; r < Rounds; ++r)
#pragma GCC unroll 4
            for (int g = 0; g < G; ++g) x[g] = _mm512_aesenc_epi128(x[g], rk[r]);
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) x[g] = _mm512_aesenclast_epi128(x[g], rk[Rounds]);
    }
    inline __m128i encrypt1(__m128i x) const {
        x = _mm_xor_si128(x, _mm512_castsi512_si128(rk[0]));
        for (unsigned r = 1; r < Rounds; ++r) x = _mm_aesenc_si128(x, _mm512_castsi512_si128(rk[r]));
        return _mm_aesenclast_si128(x, _mm512_castsi512_si128(rk[Rounds]));
    }
};

inline __m512i lane_counts(int first) {  // first, first+1, first+2, first+3 in each lane's low dword
    return _mm512_set_epi32(0, 0, 0, first + 3, 0, 0, 0, first + 2, 0, 0, 0, first + 1, 0, 0, 0, first);
}

// GHASH of the AAD (zero-padded to whole blocks) onto x, one block at a time (AADs are short).
inline __m128i ghash_aad(__m128i x, const std::uint8_t* aad, std::size_t len, __m128i h1) {
    for (; len >= 16; aad += 16, len -= 16)
        x = gf_mul(_mm_xor_si128(x, reverse(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aad)))), h1);
    if (len) {
        const __m128i b = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << len) - 1), aad);
        x = gf_mul(_mm_xor_si128(x, reverse(b)), h1);
    }
    return x;
}

inline __mmask64 bytes_mask(std::size_t n) { return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1; }

// The text: whole 256-byte steps, then a tail of 1..255 bytes in G = 1..4 zmm groups.
// Seal GHASHes what it writes, open what it reads.
template <unsigned Rounds, bool Seal>
struct Text {
    const Aes<Rounds>& aes;
    const AesGcm::Key& key;
    __m512i ctr[4];  // reflected counter blocks of the next step
    __m128i x;       // GHASH so far

    inline void step(const std::uint8_t* in, std::uint8_t* out) {
        __m512i ks[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
        const __m512i sixteen = _mm512_set_epi32(0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 16);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) ctr[g] = _mm512_add_epi32(ctr[g], sixteen);
        aes.template encrypt<4>(ks);
        Sums s{_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
            const __m512i d = _mm512_loadu_si512(in + 64 * g);
            const __m512i c = _mm512_xor_si512(d, ks[g]);
            _mm512_storeu_si512(out + 64 * g, c);
            __m512i b = _mm512_shuffle_epi8(Seal ? c : d, reverse_mask512());
            if (g == 0) b = _mm512_xor_si512(b, _mm512_zextsi128_si512(x));
            accumulate(s, b, _mm512_load_si512(key.h_powers[4 * g]));
        }
        x = finish(s);
    }

    template <int G>
    inline void tail(const std::uint8_t* in, std::uint8_t* out, std::size_t len) {
        __m512i ks[G];
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) ks[g] = ctr[g];
        aes.template encrypt<G>(ks);
        const std::size_t blocks = (len + 15) / 16;
        const std::uint8_t* powers = key.h_powers[16 - blocks];  // H^blocks .. H^1
        Sums s{_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
            const std::size_t done = 64 * static_cast<std::size_t>(g);
            const __mmask64 m = bytes_mask(len - done);
            const __m512i d = _mm512_maskz_loadu_epi8(m, in + done);
            const __m512i c = _mm512_xor_si512(d, ks[g]);
            _mm512_mask_storeu_epi8(out + done, m, c);
            // GHASH sees the text zero-padded: bytes past the end are zero in d, not in c.
            __m512i b = _mm512_shuffle_epi8(Seal ? _mm512_maskz_mov_epi8(m, c) : d, reverse_mask512());
            if (g == 0) b = _mm512_xor_si512(b, _mm512_zextsi128_si512(x));
            const std::size_t lanes = (blocks - 4 * g) >= 4 ? 4 : blocks - 4 * g;
            const __mmask8 lane_mask = static_cast<__mmask8>((1u << (2 * lanes)) - 1);
            accumulate(s, b, _mm512_maskz_loadu_epi64(lane_mask, powers + 64 * g));
        }
        x = finish(s);
    }
};

template <unsigned Rounds, bool Seal>
inline __m128i crypt(const AesGcm::Key& key, const std::uint8_t* nonce, const std::uint8_t* aad,
                     std::size_t aad_len, const std::uint8_t* in, std::uint8_t* out, std::size_t len) {
    const Aes<Rounds> aes(key);
    const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(key.h_powers[15]));
    // J0 = nonce || 1, reflected: the 32-bit counter is the low dword.
    const __m128i nonce_part = _mm_maskz_loadu_epi8(0x0fff, nonce);
    const __m128i j0 = _mm_insert_epi8(nonce_part, 1, 15);
    const __m512i j0_rev = broadcast4(reverse(j0));

    Text<Rounds, Seal> t{aes, key, {}, ghash_aad(_mm_setzero_si128(), aad, aad_len, h1)};
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) t.ctr[g] = _mm512_add_epi32(j0_rev, lane_counts(1 + 4 * g));
    std::size_t done = 0;
    for (; len - done >= 256; done += 256) t.step(in + done, out + done);
    const std::size_t rest = len - done;
    if (rest > 192) t.template tail<4>(in + done, out + done, rest);
    else if (rest > 128) t.template tail<3>(in + done, out + done, rest);
    else if (rest > 64) t.template tail<2>(in + done, out + done, rest);
    else if (rest > 0) t.template tail<1>(in + done, out + done, rest);

    const __m128i lengths = _mm_set_epi64x(static_cast<long long>(aad_len * 8), static_cast<long long>(len * 8));
    const __m128i s = gf_mul(_mm_xor_si128(t.x, lengths), h1);
    return _mm_xor_si128(reverse(s), aes.encrypt1(j0));
}

}  // namespace

void seal(const AesGcm::Key& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len,
          const std::uint8_t* in, std::uint8_t* out, std::size_t len, std::uint8_t* tag) {
    const __m128i t = key.rounds == 10 ? crypt<10, true>(key, nonce, aad, aad_len, in, out, len)
                                       : crypt<14, true>(key, nonce, aad, aad_len, in, out, len);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tag), t);
}

bool open(const AesGcm::Key& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len,
          const std::uint8_t* in, std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len) {
    const __m128i t = key.rounds == 10 ? crypt<10, false>(key, nonce, aad, aad_len, in, out, len)
                                       : crypt<14, false>(key, nonce, aad, aad_len, in, out, len);
    // Constant time: every byte compared, one mask tested.
    const __mmask16 want = static_cast<__mmask16>((1u << tag_len) - 1);
    const __m128i given = _mm_maskz_loadu_epi8(want, tag);
    const __mmask16 equal = _mm_mask_cmpeq_epi8_mask(want, given, t);
    if (equal == want) return true;
    for (std::size_t done = 0; done < len; done += 64)
        _mm512_mask_storeu_epi8(out + done, bytes_mask(len - done), _mm512_setzero_si512());
    return false;
}

}  // namespace espvpn::gcm_avx512
#endif
