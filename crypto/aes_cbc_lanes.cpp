#include "crypto/aes_cbc_lanes.h"

#include <nettle/cbc.h>

#include <algorithm>
#include <cstring>

#include "crypto/aesni_key_schedule.h"
#include "crypto/cpu_features.h"
#include "crypto/secret.h"

namespace espvpn {

#if defined(__x86_64__)
namespace {

// One message in flight: its chain value (the previous ciphertext block), the
// next block to encrypt and how many are left.
struct Lane {
    __m128i chain;
    std::uint8_t* text;
    std::size_t blocks;
};

// `blocks` blocks of each of K lanes, the lanes' rounds interleaved.
template <int K, unsigned Rounds>
ESPVPN_AESNI_TARGET void run_lanes(Lane* lane, std::size_t blocks, const __m128i* rk) {
    __m128i c[K];
    std::uint8_t* p[K];
    // Fully unrolled (the pragmas), so that the K chain values live in registers.
#pragma GCC unroll 8
    for (int j = 0; j < K; ++j) {
        c[j] = lane[j].chain;
        p[j] = lane[j].text;
    }
    for (std::size_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 8
        for (int j = 0; j < K; ++j)
            c[j] = _mm_xor_si128(_mm_xor_si128(c[j], _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[j]))), rk[0]);
#pragma GCC unroll 14
        for (unsigned r = 1; r < Rounds; ++r) {
            const __m128i key = rk[r];
#pragma GCC unroll 8
            for (int j = 0; j < K; ++j) c[j] = _mm_aesenc_si128(c[j], key);
        }
#pragma GCC unroll 8
        for (int j = 0; j < K; ++j) {
            c[j] = _mm_aesenclast_si128(c[j], rk[Rounds]);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(p[j]), c[j]);
            p[j] += 16;
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < K; ++j) {
        lane[j].chain = c[j];
        lane[j].text = p[j];
        lane[j].blocks -= blocks;
    }
}

template <unsigned Rounds>
ESPVPN_AESNI_TARGET void run_lanes(Lane* lane, std::size_t k, std::size_t blocks, const __m128i* rk) {
    switch (k) {
        case 1: return run_lanes<1, Rounds>(lane, blocks, rk);
        case 2: return run_lanes<2, Rounds>(lane, blocks, rk);
        case 3: return run_lanes<3, Rounds>(lane, blocks, rk);
        case 4: return run_lanes<4, Rounds>(lane, blocks, rk);
        case 5: return run_lanes<5, Rounds>(lane, blocks, rk);
        case 6: return run_lanes<6, Rounds>(lane, blocks, rk);
        case 7: return run_lanes<7, Rounds>(lane, blocks, rk);
        default: return run_lanes<8, Rounds>(lane, blocks, rk);
    }
}
static_assert(AesCbcLanes::kLanes == 8, "run_lanes dispatches 1..8 lanes");

// Keeps up to kLanes messages in flight: runs all of them for as many blocks as
// the shortest has left, then replaces the finished ones with the next messages.
template <unsigned Rounds>
ESPVPN_AESNI_TARGET void encrypt_interleaved(std::span<const AesCbcMessage> messages, const std::uint8_t* keys) {
    __m128i rk[Rounds + 1];
    for (unsigned r = 0; r <= Rounds; ++r) rk[r] = _mm_load_si128(reinterpret_cast<const __m128i*>(keys + 16 * r));
    Lane lane[AesCbcLanes::kLanes];
    std::size_t active = 0, next = 0;
    for (;;) {
        while (active < AesCbcLanes::kLanes && next < messages.size()) {
            const AesCbcMessage& m = messages[next++];
            if (m.len < 16) continue;
            lane[active++] = Lane{_mm_loadu_si128(reinterpret_cast<const __m128i*>(m.iv)), m.text, m.len / 16};
        }
        if (active == 0) break;
        std::size_t blocks = lane[0].blocks;
        for (std::size_t j = 1; j < active; ++j) blocks = std::min(blocks, lane[j].blocks);
        run_lanes<Rounds>(lane, active, blocks, rk);
        std::size_t kept = 0;
        for (std::size_t j = 0; j < active; ++j)
            if (lane[j].blocks != 0) lane[kept++] = lane[j];
        active = kept;
    }
    for (auto& k : rk) k = _mm_setzero_si128();
}

}  // namespace
#endif

AesCbcLanes::~AesCbcLanes() {
    secure_zero(round_keys_, sizeof round_keys_);
    secure_zero(&nettle128_, sizeof nettle128_);
    secure_zero(&nettle256_, sizeof nettle256_);
}

bool AesCbcLanes::set_key(const std::uint8_t* key, std::size_t key_len) {
    if (key_len != 16 && key_len != 32) return false;
    rounds_ = key_len == 16 ? 10 : 14;
#if defined(__x86_64__)
    use_aesni_ = detect_cpu_features().aes_ni;
    if (use_aesni_) {
        __m128i rk[15];
        aesni::expand_key(key, key_len, rk);
        for (unsigned r = 0; r <= rounds_; ++r) _mm_store_si128(reinterpret_cast<__m128i*>(round_keys_ + 16 * r), rk[r]);
        secure_zero(rk, sizeof rk);
        return true;
    }
#endif
    if (key_len == 16) aes128_set_encrypt_key(&nettle128_, key);
    else aes256_set_encrypt_key(&nettle256_, key);
    return true;
}

void AesCbcLanes::encrypt(std::span<const AesCbcMessage> messages) const {
#if defined(__x86_64__)
    if (use_aesni_) {
        if (rounds_ == 10) encrypt_interleaved<10>(messages, round_keys_);
        else encrypt_interleaved<14>(messages, round_keys_);
        return;
    }
#endif
    for (const AesCbcMessage& m : messages) {
        std::uint8_t chain[16];
        std::memcpy(chain, m.iv, sizeof chain);
        const std::size_t len = m.len - m.len % 16;
        if (rounds_ == 10) cbc_aes128_encrypt(&nettle128_, chain, len, m.text, m.text);
        else cbc_aes256_encrypt(&nettle256_, chain, len, m.text, m.text);
    }
}

}  // namespace espvpn
