#include "crypto/hmac_sha1_lanes.h"

#include <nettle/sha1.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "crypto/cpu_features.h"
#include "crypto/secret.h"
#include "protocols/base/byte_order.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define ESPVPN_SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))
#endif

namespace espvpn {

namespace {

constexpr std::size_t kBlock = 64;
constexpr std::uint32_t kSha1Iv[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};

#if defined(__x86_64__)

// One group of four rounds (group G of 0..19) for every lane, with the SHA
// extensions (the instruction pattern of Intel's SHA extensions paper, 2013):
// the message words of group G >= 4 come from groups G-4..G-1, E from the
// state before the previous group.
template <int N, int G>
ESPVPN_SHA_TARGET inline void group(__m128i (&abcd)[N], __m128i (&prev)[N], const __m128i (&e_init)[N],
                                    __m128i (&m)[N][4]) {
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
        if constexpr (G >= 4) {
            m[l][G % 4] = _mm_sha1msg2_epu32(
                _mm_xor_si128(_mm_sha1msg1_epu32(m[l][G % 4], m[l][(G + 1) % 4]), m[l][(G + 2) % 4]),
                m[l][(G + 3) % 4]);
        }
        __m128i e;
        if constexpr (G == 0) {
            e = _mm_add_epi32(e_init[l], m[l][0]);
        } else {
            e = _mm_sha1nexte_epu32(prev[l], m[l][G % 4]);
        }
        prev[l] = abcd[l];
        abcd[l] = _mm_sha1rnds4_epu32(abcd[l], e, G / 5);
    }
}

template <int N, int... G>
ESPVPN_SHA_TARGET inline void groups(__m128i (&abcd)[N], __m128i (&prev)[N], const __m128i (&e_init)[N],
                                     __m128i (&m)[N][4], std::integer_sequence<int, G...>) {
    (group<N, G>(abcd, prev, e_init, m), ...);
}

// One 64-byte block into each of N states (N independent SHA-1 computations).
template <int N>
ESPVPN_SHA_TARGET void compress_lanes(std::uint32_t* const* state, const std::uint8_t* const* block) {
    const __m128i swap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
    __m128i abcd[N], e_init[N], prev[N], m[N][4];
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
        abcd[l] = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state[l])), 0x1b);
        e_init[l] = _mm_set_epi32(static_cast<int>(state[l][4]), 0, 0, 0);
        for (int k = 0; k < 4; ++k)
            m[l][k] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block[l] + 16 * k)), swap);
    }
    groups<N>(abcd, prev, e_init, m, std::make_integer_sequence<int, 20>{});
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
        // The starting state is reloaded from memory, not kept: registers are short
        // (16 XMM; the SHA instructions have no VEX form to reach more).
        const __m128i e = _mm_sha1nexte_epu32(prev[l], _mm_set_epi32(static_cast<int>(state[l][4]), 0, 0, 0));
        abcd[l] = _mm_add_epi32(
            abcd[l], _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state[l])), 0x1b));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(state[l]), _mm_shuffle_epi32(abcd[l], 0x1b));
        state[l][4] = static_cast<std::uint32_t>(_mm_extract_epi32(e, 3));
    }
}

#endif

// Where one message is: its data blocks, then its padded tail (1 or 2 blocks,
// copied here), then the outer hash's one block. The state is the inner hash's
// until the tail is done, then the outer one's.
struct Lane {
    const HmacSha1Message* msg = nullptr;
    std::size_t offset = 0;
    enum Phase : std::uint8_t { data, tail, outer, done } phase = done;
    unsigned tail_blocks = 0, tail_next = 0;
    std::uint32_t state[5]{};
    alignas(16) std::uint8_t pad[2 * kBlock]{};  // the inner tail, later the outer block
};

void start(Lane& lane, const HmacSha1Message& msg, const std::uint32_t (&inner)[5]) {
    lane.msg = &msg;
    lane.offset = 0;
    lane.phase = Lane::data;
    std::memcpy(lane.state, inner, sizeof lane.state);
}

// The next block to compress into lane.state, or nullptr when the message is
// finished (its MAC then written out).
const std::uint8_t* next_block(Lane& lane, const std::uint32_t (&outer)[5]) {
    const HmacSha1Message& msg = *lane.msg;
    if (lane.phase == Lane::data) {
        if (msg.len - lane.offset >= kBlock) {
            const std::uint8_t* p = msg.data + lane.offset;
            lane.offset += kBlock;
            return p;
        }
        const std::size_t rest = msg.len - lane.offset;
        lane.tail_blocks = rest + 1 + 8 <= kBlock ? 1 : 2;
        std::memset(lane.pad, 0, sizeof lane.pad);
        if (rest) std::memcpy(lane.pad, msg.data + lane.offset, rest);
        lane.pad[rest] = 0x80;
        store_be64(lane.pad + lane.tail_blocks * kBlock - 8, (kBlock + std::uint64_t{msg.len}) * 8);
        lane.tail_next = 0;
        lane.phase = Lane::tail;
    }
    if (lane.phase == Lane::tail) {
        if (lane.tail_next < lane.tail_blocks) return lane.pad + kBlock * lane.tail_next++;
        // The inner hash is done: its digest is the outer hash's message.
        std::memset(lane.pad, 0, kBlock);
        for (int i = 0; i < 5; ++i) store_be32(lane.pad + 4 * i, lane.state[i]);
        lane.pad[20] = 0x80;
        store_be64(lane.pad + kBlock - 8, (kBlock + 20) * 8);
        std::memcpy(lane.state, outer, sizeof lane.state);
        lane.phase = Lane::outer;
        return lane.pad;
    }
    if (lane.phase == Lane::outer) {
        std::uint8_t digest[20];
        for (int i = 0; i < 5; ++i) store_be32(digest + 4 * i, lane.state[i]);
        std::memcpy(msg.out, digest, msg.out_len);
        secure_zero(digest, sizeof digest);
        lane.phase = Lane::done;  // compute() zeroes the lanes when the batch is done
    }
    return nullptr;
}

}  // namespace

HmacSha1Lanes::~HmacSha1Lanes() {
    secure_zero(inner_, sizeof inner_);
    secure_zero(outer_, sizeof outer_);
}

void HmacSha1Lanes::set_key(const std::uint8_t* key, std::size_t key_len, bool allow_sha_ni) {
    std::array<std::uint8_t, kBlock> k{};
    if (key_len > kBlock) {
        sha1_ctx ctx;
        sha1_init(&ctx);
        sha1_update(&ctx, key_len, key);
        sha1_digest(&ctx, SHA1_DIGEST_SIZE, k.data());
        secure_zero(&ctx, sizeof ctx);
    } else if (key_len) {
        std::memcpy(k.data(), key, key_len);
    }
    std::array<std::uint8_t, kBlock> block;
    for (std::size_t i = 0; i < kBlock; ++i) block[i] = k[i] ^ 0x36;
    std::memcpy(inner_, kSha1Iv, sizeof inner_);
    nettle_sha1_compress(inner_, block.data());
    for (std::size_t i = 0; i < kBlock; ++i) block[i] = k[i] ^ 0x5c;
    std::memcpy(outer_, kSha1Iv, sizeof outer_);
    nettle_sha1_compress(outer_, block.data());
    secure_zero(k.data(), k.size());
    secure_zero(block.data(), block.size());
#if defined(__x86_64__)
    use_sha_ni_ = allow_sha_ni && detect_cpu_features().sha_ni;
#endif
}

bool HmacSha1Lanes::worth_using() {
    if (const char* force = std::getenv("ESPVPN_SHA1_LANES"); force && *force) return force[0] == '1';
    const CpuFeatures f = detect_cpu_features();
    return f.sha_ni && f.amd;
}

// A small multi-buffer scheduler: kLanes messages in flight; a lane whose message
// is finished takes the next one, so lanes stay full until the batch runs out.
void HmacSha1Lanes::compute(std::span<const HmacSha1Message> messages) const {
    std::array<Lane, kLanes> lanes;
    std::size_t next = 0;
    for (;;) {
        std::uint32_t* states[kLanes];
        const std::uint8_t* blocks[kLanes];
        int n = 0;
        for (Lane& lane : lanes) {
            const std::uint8_t* block = lane.phase == Lane::done ? nullptr : next_block(lane, outer_);
            while (!block && next < messages.size()) {
                start(lane, messages[next++], inner_);
                block = next_block(lane, outer_);
            }
            if (!block) continue;
            states[n] = lane.state;
            blocks[n++] = block;
        }
        if (n == 0) {
            secure_zero(lanes.data(), sizeof lanes);
            return;
        }
#if defined(__x86_64__)
        if (use_sha_ni_) {
            switch (n) {
                case 4: compress_lanes<4>(states, blocks); break;
                case 3: compress_lanes<3>(states, blocks); break;
                case 2: compress_lanes<2>(states, blocks); break;
                default: compress_lanes<1>(states, blocks); break;
            }
            continue;
        }
#endif
        for (int l = 0; l < n; ++l) nettle_sha1_compress(states[l], blocks[l]);
    }
}

}  // namespace espvpn
