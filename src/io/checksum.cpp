// The wide loops of src/io/checksum.h: 32 bytes a step with AVX2, four accumulators of
// 64-bit lanes each taking one 32-bit half of every lane (2^16 = 1 modulo 0xffff, so sums
// of 32-bit words fold to the same ones' complement sum as sums of 16-bit words; 64-bit
// lanes cannot overflow on any packet). The portable loops where the CPU lacks AVX2.
#include "src/io/checksum.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace espvpn::io::checksum {

namespace {

// acc + value with the end-around carry.
inline std::uint64_t add_carry(std::uint64_t acc, std::uint64_t value) {
    acc += value;
    return acc + (acc < value);
}

#if defined(__x86_64__)
bool has_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}

// The sum of the 32-bit halves of every 64-bit lane of the four accumulators.
__attribute__((target("avx2"))) std::uint64_t total(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    alignas(32) std::uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
    // After k steps each lane is below k * 2^32, the sum of all sixteen below k * 2^36:
    // no wrap before 2^28 steps (16 GiB in one call).
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

template <bool Copy>
__attribute__((target("avx2"))) std::uint64_t wide(std::uint8_t* dst, const std::uint8_t* src, std::size_t n,
                                                   std::size_t& done) {
    const __m256i low = _mm256_set1_epi64x(0xffffffff);
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
        if constexpr (Copy) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), v);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), w);
        }
        a = _mm256_add_epi64(a, _mm256_and_si256(v, low));
        b = _mm256_add_epi64(b, _mm256_srli_epi64(v, 32));
        c = _mm256_add_epi64(c, _mm256_and_si256(w, low));
        d = _mm256_add_epi64(d, _mm256_srli_epi64(w, 32));
    }
    done = i;
    return total(a, b, c, d);
}
#endif

}  // namespace

std::uint64_t add_wide(std::uint64_t acc, const std::uint8_t* p, std::size_t n) {
#if defined(__x86_64__)
    if (has_avx2()) {
        std::size_t done = 0;
        acc = add_carry(acc, wide<false>(nullptr, p, n, done));
        return add_narrow(acc, {p + done, n - done});
    }
#endif
    return add_narrow(acc, {p, n});
}

std::uint64_t copy_and_add_wide(std::uint8_t* dst, const std::uint8_t* src, std::size_t n, std::uint64_t acc) {
#if defined(__x86_64__)
    if (has_avx2()) {
        std::size_t done = 0;
        acc = add_carry(acc, wide<true>(dst, src, n, done));
        return copy_and_add_narrow(dst + done, src + done, n - done, acc);
    }
#endif
    return copy_and_add_narrow(dst, src, n, acc);
}

}  // namespace espvpn::io::checksum
