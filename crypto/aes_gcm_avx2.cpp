// The 256-bit vector part of crypto/aes_gcm.h, compiled for AVX2 + VAES + VPCLMULQDQ and
// nothing wider (crypto/CMakeLists.txt; the test crypto_gcm_avx2_no_avx512 disassembles the
// object and fails on any zmm, mask or EVEX-only register): the path for CPUs with vector AES
// but no AVX-512 (Intel Core 12th gen and later, AMD Zen 3). Nothing here runs unless
// AesGcm::cpu_has(AesGcm::Path::avx2); every function is in an anonymous namespace or in
// gcm_avx2 and uses no inline library code (fixed-size memcpy is a plain move, memset a call
// into the C library), so no AVX2 copy of a shared inline function can reach code that runs
// on other CPUs.
//
// The same arithmetic as the AVX-512 path (crypto/gcm_clmul.h) on half the width: a ymm
// holds two blocks, so one VAESENC runs a round of two blocks and one VPCLMULQDQ makes two
// of the four partial products of a GHASH multiplication. A step is 256 bytes, sixteen
// blocks in eight ymm: eight independent AES chains keep the AES unit busy through each
// instruction's latency, and the sixteen blocks are multiplied by H^16 .. H^1 (the key's
// h_powers, two per ymm) and summed unreduced, so a step pays one reduction.
//
// Without AVX-512 there are no byte-masked loads and stores: the last, partial ymm of a text
// (and a partial AAD block, a truncated tag) is read and written in pieces of 16, 8, 4, 2 and
// 1 bytes, never touching a byte outside the caller's buffers (one may end at a page boundary).
#include "crypto/aes_gcm_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "crypto/gcm_clmul.h"

namespace espvpn::gcm_avx2 {
namespace {

using gcm_clmul::gf_mul;
using gcm_clmul::reduce;
using gcm_clmul::reverse;

inline __m256i both_lanes(__m128i x) { return _mm256_broadcastsi128_si256(x); }
inline __m256i reverse_mask256() { return both_lanes(gcm_clmul::reverse_mask()); }

inline __m128i xor_lanes(__m256i v) {
    return _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// 32 bytes of 0xff then 32 of zero: 32 bytes read from kOnesThenZeros + 32 - n keep the first
// n bytes of a ymm (n = 0..32).
alignas(64) const std::uint8_t kOnesThenZeros[64] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
inline __m256i first_bytes(std::size_t n) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnesThenZeros + 32 - n));
}

// The n (0..15) bytes at p in the low bytes of an xmm, the others zero. (The fixed-size
// memcpy calls are single loads.)
inline __m128i load_short(const std::uint8_t* p, std::size_t n) {
    std::uint64_t first = 0, rest = 0;
    std::size_t at = 0;
    unsigned shift = 0;
    if (n & 8) {
        std::memcpy(&first, p, 8);
        at = 8;
    }
    if (n & 4) {
        std::uint32_t v;
        std::memcpy(&v, p + at, 4);
        rest = v;
        at += 4;
        shift = 32;
    }
    if (n & 2) {
        std::uint16_t v;
        std::memcpy(&v, p + at, 2);
        rest |= std::uint64_t{v} << shift;
        at += 2;
        shift += 16;
    }
    if (n & 1) rest |= std::uint64_t{p[at]} << shift;
    return n & 8 ? _mm_set_epi64x(static_cast<long long>(rest), static_cast<long long>(first))
                 : _mm_set_epi64x(0, static_cast<long long>(rest));
}

// The low n (0..15) bytes of v to p.
inline void store_short(std::uint8_t* p, __m128i v, std::size_t n) {
    auto w = static_cast<std::uint64_t>(_mm_cvtsi128_si64(v));
    std::size_t at = 0;
    if (n & 8) {
        std::memcpy(p, &w, 8);
        w = static_cast<std::uint64_t>(_mm_extract_epi64(v, 1));
        at = 8;
    }
    if (n & 4) {
        const auto x = static_cast<std::uint32_t>(w);
        std::memcpy(p + at, &x, 4);
        w >>= 32;
        at += 4;
    }
    if (n & 2) {
        const auto x = static_cast<std::uint16_t>(w);
        std::memcpy(p + at, &x, 2);
        w >>= 16;
        at += 2;
    }
    if (n & 1) p[at] = static_cast<std::uint8_t>(w);
}

// The n (1..31) bytes at p, zero-padded to a ymm; and the first n bytes of a ymm to p.
inline __m256i load_partial(const std::uint8_t* p, std::size_t n) {
    if (n < 16) return _mm256_zextsi128_si256(load_short(p, n));
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), load_short(p + 16, n - 16), 1);
}
inline void store_partial(std::uint8_t* p, __m256i v, std::size_t n) {
    if (n < 16) return store_short(p, _mm256_castsi256_si128(v), n);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(v));
    store_short(p + 16, _mm256_extracti128_si256(v, 1), n - 16);
}

// Products of reflected blocks (two per ymm) with powers of H (two per ymm), summed unreduced.
struct Sums {
    __m256i lo, mi, hi;
};
inline void accumulate(Sums& s, __m256i b, __m256i h) {
    s.lo = _mm256_xor_si256(s.lo, _mm256_clmulepi64_epi128(b, h, 0x00));
    s.hi = _mm256_xor_si256(s.hi, _mm256_clmulepi64_epi128(b, h, 0x11));
    s.mi = _mm256_xor_si256(s.mi, _mm256_xor_si256(_mm256_clmulepi64_epi128(b, h, 0x01),
                                                   _mm256_clmulepi64_epi128(b, h, 0x10)));
}
inline __m128i finish(const Sums& s) { return reduce(xor_lanes(s.lo), xor_lanes(s.mi), xor_lanes(s.hi)); }

// The round keys are read from the key as memory operands: sixteen ymm registers cannot hold
// eight blocks in flight and fifteen round keys at once.
template <unsigned Rounds>
struct Aes {
    const AesGcm::Key& key;
    inline __m256i rk(unsigned r) const {
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(key.round_keys[r]));
    }
    // G ymm of reflected counter blocks to keystream.
    template <int G>
    inline void encrypt(__m256i* x) const {
        const __m256i mask = reverse_mask256();
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) x[g] = _mm256_xor_si256(_mm256_shuffle_epi8(x[g], mask), rk(0));
#pragma GCC unroll 14
        for (unsigned r = 1; r < Rounds; ++r) {
            const __m256i k = rk(r);
#pragma GCC unroll 8
            for (int g = 0; g < G; ++g) x[g] = _mm256_aesenc_epi128(x[g], k);
        }
        const __m256i last = rk(Rounds);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) x[g] = _mm256_aesenclast_epi128(x[g], last);
    }
    inline __m128i encrypt1(__m128i x) const {
        auto k = [&](unsigned r) { return _mm_load_si128(reinterpret_cast<const __m128i*>(key.round_keys[r])); };
        x = _mm_xor_si128(x, k(0));
        for (unsigned r = 1; r < Rounds; ++r) x = _mm_aesenc_si128(x, k(r));
        return _mm_aesenclast_si128(x, k(Rounds));
    }
};

// n added to the counter (the low dword) of both blocks of a ymm.
inline __m256i plus(__m256i ctr, int n) { return _mm256_add_epi32(ctr, _mm256_set_epi32(0, 0, 0, n, 0, 0, 0, n)); }

// GHASH of the AAD (zero-padded to whole blocks) onto x, one block at a time (AADs are short).
inline __m128i ghash_aad(__m128i x, const std::uint8_t* aad, std::size_t len, __m128i h1) {
    for (; len >= 16; aad += 16, len -= 16)
        x = gf_mul(_mm_xor_si128(x, reverse(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aad)))), h1);
    if (len) x = gf_mul(_mm_xor_si128(x, reverse(load_short(aad, len))), h1);
    return x;
}

// The text: whole 256-byte steps, then a tail of 1..255 bytes in G = 1..8 ymm.
// Seal GHASHes what it writes, open what it reads.
template <unsigned Rounds, bool Seal>
struct Text {
    const Aes<Rounds>& aes;
    const AesGcm::Key& key;
    __m256i ctr;  // reflected counter blocks of the next step's first two blocks (then +2, +4, ...)
    __m128i x;    // GHASH so far

    // One step: the keystream of 256 bytes, XORed from in to out; under its AES rounds, the
    // GHASH of the 256 bytes at `hash` (nullptr: none). Open hashes this step's input; seal
    // hashes the previous step's output, as this step's is not there yet: the two are
    // independent, so the AES and carry-less multiply units work side by side.
    inline void step(const std::uint8_t* in, std::uint8_t* out, const std::uint8_t* hash) {
        const __m256i mask = reverse_mask256();
        __m256i ks[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) ks[g] = _mm256_xor_si256(_mm256_shuffle_epi8(plus(ctr, 2 * g), mask), aes.rk(0));
        ctr = plus(ctr, 16);
        Sums s{_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 14
        for (unsigned r = 1; r < Rounds; ++r) {
            const __m256i k = aes.rk(r);
#pragma GCC unroll 8
            for (int g = 0; g < 8; ++g) ks[g] = _mm256_aesenc_epi128(ks[g], k);
            if (hash && r <= 8) ghash_one(s, hash, static_cast<int>(r) - 1);  // ymm r-1 of the 8
        }
        const __m256i last = aes.rk(Rounds);
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * g));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * g),
                                _mm256_xor_si256(d, _mm256_aesenclast_epi128(ks[g], last)));
        }
        if (hash) x = finish(s);
    }
    // GHASH of 256 bytes alone (seal's last whole step).
    inline void ghash_step(const std::uint8_t* hash) {
        Sums s{_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) ghash_one(s, hash, g);
        x = finish(s);
    }
    // Blocks 2g, 2g+1 of 256 bytes times H^(16-2g), H^(15-2g); the GHASH so far joins block 0.
    inline void ghash_one(Sums& s, const std::uint8_t* hash, int g) {
        __m256i b = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hash + 32 * g)),
                                        reverse_mask256());
        if (g == 0) b = _mm256_xor_si256(b, _mm256_zextsi128_si256(x));
        accumulate(s, b, _mm256_load_si256(reinterpret_cast<const __m256i*>(key.h_powers[2 * g])));
    }

    template <int G>
    inline void tail(const std::uint8_t* in, std::uint8_t* out, std::size_t len) {
        __m256i ks[G];
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) ks[g] = plus(ctr, 2 * g);
        aes.template encrypt<G>(ks);
        const std::size_t blocks = (len + 15) / 16;
        const std::uint8_t* powers = key.h_powers[16 - blocks];  // H^blocks .. H^1
        const __m256i mask = reverse_mask256();
        Sums s{_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
            const std::size_t done = 32 * static_cast<std::size_t>(g);
            __m256i d, c;
            if (g + 1 < G || len - done == 32) {
                d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + done));
                c = _mm256_xor_si256(d, ks[g]);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + done), c);
            } else {  // 1..31 bytes
                const std::size_t n = len - done;
                d = load_partial(in + done, n);
                // GHASH sees the text zero-padded: bytes past the end are zero in d, not in c.
                c = _mm256_and_si256(_mm256_xor_si256(d, ks[g]), first_bytes(n));
                store_partial(out + done, c, n);
            }
            __m256i b = _mm256_shuffle_epi8(Seal ? c : d, mask);
            if (g == 0) b = _mm256_xor_si256(b, _mm256_zextsi128_si256(x));
            // Two powers, or one (and a zero) where the last ymm holds a single block.
            const __m256i h =
                g + 1 < G || 2 * static_cast<std::size_t>(g) + 1 < blocks
                    ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(powers + done))
                    : _mm256_zextsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(powers + done)));
            accumulate(s, b, h);
        }
        x = finish(s);
    }
};

template <unsigned Rounds, bool Seal>
inline __m128i crypt(const AesGcm::Key& key, const std::uint8_t* nonce, const std::uint8_t* aad,
                     std::size_t aad_len, const std::uint8_t* in, std::uint8_t* out, std::size_t len) {
    const Aes<Rounds> aes{key};
    const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(key.h_powers[15]));
    // J0 = nonce || 1, reflected: the 32-bit counter is the low dword.
    std::uint64_t n0;
    std::uint32_t n1;
    std::memcpy(&n0, nonce, 8);
    std::memcpy(&n1, nonce + 8, 4);
    const __m128i j0 = _mm_set_epi64x(static_cast<long long>(n1 | std::uint64_t{1} << 56), static_cast<long long>(n0));
    // The first text block's counter is J0 + 1: blocks 1 and 2 in the first ymm.
    const __m256i first = _mm256_add_epi32(both_lanes(reverse(j0)), _mm256_set_epi32(0, 0, 0, 2, 0, 0, 0, 1));
    // E_K(J0) masks the tag; computed first, its chain of rounds overlaps the rest.
    const __m128i tag_mask = aes.encrypt1(j0);

    Text<Rounds, Seal> t{aes, key, first, ghash_aad(_mm_setzero_si128(), aad, aad_len, h1)};
    std::size_t done = 0;
    const std::uint8_t* sealed = nullptr;  // seal: the last step's output, not yet hashed
    for (; len - done >= 256; done += 256) {
        t.step(in + done, out + done, Seal ? sealed : in + done);
        sealed = out + done;
    }
    if (Seal && sealed) t.ghash_step(sealed);
    switch ((len - done + 31) / 32) {  // ymm in the tail
        case 8: t.template tail<8>(in + done, out + done, len - done); break;
        case 7: t.template tail<7>(in + done, out + done, len - done); break;
        case 6: t.template tail<6>(in + done, out + done, len - done); break;
        case 5: t.template tail<5>(in + done, out + done, len - done); break;
        case 4: t.template tail<4>(in + done, out + done, len - done); break;
        case 3: t.template tail<3>(in + done, out + done, len - done); break;
        case 2: t.template tail<2>(in + done, out + done, len - done); break;
        case 1: t.template tail<1>(in + done, out + done, len - done); break;
        default: break;  // no text left
    }

    const __m128i lengths = _mm_set_epi64x(static_cast<long long>(aad_len * 8), static_cast<long long>(len * 8));
    const __m128i s = gf_mul(_mm_xor_si128(t.x, lengths), h1);
    return _mm_xor_si128(reverse(s), tag_mask);
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
    const __m128i given =
        tag_len == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(tag)) : load_short(tag, tag_len);
    const auto equal = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(given, t)));
    const unsigned want = (1u << tag_len) - 1;
    if ((equal & want) == want) return true;
    if (len) std::memset(out, 0, len);  // out may be null when len is 0
    return false;
}

}  // namespace espvpn::gcm_avx2
#endif
