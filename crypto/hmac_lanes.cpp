#include "crypto/hmac_lanes.h"

#include <nettle/sha1.h>
#include <nettle/sha2.h>

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

constexpr std::size_t kBlock = 64;  // both hashes

#if defined(__x86_64__)

// ---- SHA-1 with the SHA extensions, N lanes ----------------------------------------

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
ESPVPN_SHA_TARGET void sha1_compress_lanes(std::uint32_t* const* state, const std::uint8_t* const* block) {
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

// ---- SHA-256 with the SHA extensions, N lanes --------------------------------------

alignas(16) constexpr std::uint32_t kSha256K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};

// Four rounds (group G of 0..15) for every lane. The state is in the two halves the
// SHA256RNDS2 instruction works on (ABEF, CDGH). Message words of group G >= 4
// (FIPS 180-4: W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]): SHA256MSG1 adds
// s0 to the words of groups G-4/G-3, the words t-7..t-4 come from groups G-2/G-1,
// SHA256MSG2 adds s1.
template <int N, int G>
ESPVPN_SHA_TARGET inline void sha256_group(__m128i (&abef)[N], __m128i (&cdgh)[N], __m128i (&m)[N][4]) {
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
        if constexpr (G >= 4) {
            __m128i t = _mm_sha256msg1_epu32(m[l][G % 4], m[l][(G + 1) % 4]);
            t = _mm_add_epi32(t, _mm_alignr_epi8(m[l][(G + 3) % 4], m[l][(G + 2) % 4], 4));
            m[l][G % 4] = _mm_sha256msg2_epu32(t, m[l][(G + 3) % 4]);
        }
        __m128i wk = _mm_add_epi32(m[l][G % 4], _mm_load_si128(reinterpret_cast<const __m128i*>(kSha256K + 4 * G)));
        cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], wk);
        wk = _mm_shuffle_epi32(wk, 0x0e);
        abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l], wk);
    }
}

template <int N, int... G>
ESPVPN_SHA_TARGET inline void sha256_groups(__m128i (&abef)[N], __m128i (&cdgh)[N], __m128i (&m)[N][4],
                                            std::integer_sequence<int, G...>) {
    (sha256_group<N, G>(abef, cdgh, m), ...);
}

// One 64-byte block into each of N states (A..H as 8 words, FIPS 180-4's order).
template <int N>
ESPVPN_SHA_TARGET void sha256_compress_lanes(std::uint32_t* const* state, const std::uint8_t* const* block) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);  // big-endian words
    __m128i abef[N], cdgh[N], m[N][4];
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
        const __m128i cdab = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state[l])), 0xb1);
        const __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state[l] + 4)), 0x1b);
        abef[l] = _mm_alignr_epi8(cdab, efgh, 8);
        cdgh[l] = _mm_blend_epi16(efgh, cdab, 0xf0);
        for (int k = 0; k < 4; ++k)
            m[l][k] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block[l] + 16 * k)), swap);
    }
    sha256_groups<N>(abef, cdgh, m, std::make_integer_sequence<int, 16>{});
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
        // Back to A..H, plus the state the block started from (reloaded from memory).
        const __m128i feba = _mm_shuffle_epi32(abef[l], 0x1b);
        const __m128i dchg = _mm_shuffle_epi32(cdgh[l], 0xb1);
        __m128i* lo = reinterpret_cast<__m128i*>(state[l]);
        __m128i* hi = reinterpret_cast<__m128i*>(state[l] + 4);
        _mm_storeu_si128(lo, _mm_add_epi32(_mm_blend_epi16(feba, dchg, 0xf0), _mm_loadu_si128(lo)));
        _mm_storeu_si128(hi, _mm_add_epi32(_mm_alignr_epi8(dchg, feba, 8), _mm_loadu_si128(hi)));
    }
}

#endif

// ---- the two hashes, for the scheduler ---------------------------------------------

struct Sha1 {
    static constexpr int kWords = 5, kDigest = 20, kLanes = 4;
    static constexpr std::uint32_t kIv[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
    static void compress(std::uint32_t* state, const std::uint8_t* block) { nettle_sha1_compress(state, block); }
    static void digest(const std::uint8_t* data, std::size_t len, std::uint8_t* out) {
        sha1_ctx ctx;
        sha1_init(&ctx);
        sha1_update(&ctx, len, data);
        sha1_digest(&ctx, SHA1_DIGEST_SIZE, out);
        secure_zero(&ctx, sizeof ctx);
    }
#if defined(__x86_64__)
    static void compress_sha_ni(int n, std::uint32_t* const* states, const std::uint8_t* const* blocks) {
        switch (n) {
            case 4: sha1_compress_lanes<4>(states, blocks); break;
            case 3: sha1_compress_lanes<3>(states, blocks); break;
            case 2: sha1_compress_lanes<2>(states, blocks); break;
            default: sha1_compress_lanes<1>(states, blocks); break;
        }
    }
#endif
};

struct Sha256 {
    static constexpr int kWords = 8, kDigest = 32, kLanes = 2;
    static constexpr std::uint32_t kIv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                             0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    // Nettle 3.8 exports no SHA-256 compression function; an update of exactly one
    // block into a context whose buffer is empty runs it once on the context's (public)
    // state words.
    static void compress(std::uint32_t* state, const std::uint8_t* block) {
        sha256_ctx ctx;
        sha256_init(&ctx);
        std::memcpy(ctx.state, state, sizeof ctx.state);
        sha256_update(&ctx, kBlock, block);
        std::memcpy(state, ctx.state, sizeof ctx.state);
        secure_zero(&ctx, sizeof ctx);
    }
    static void digest(const std::uint8_t* data, std::size_t len, std::uint8_t* out) {
        sha256_ctx ctx;
        sha256_init(&ctx);
        sha256_update(&ctx, len, data);
        sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
        secure_zero(&ctx, sizeof ctx);
    }
#if defined(__x86_64__)
    static void compress_sha_ni(int n, std::uint32_t* const* states, const std::uint8_t* const* blocks) {
        if (n == 2) {
            sha256_compress_lanes<2>(states, blocks);
        } else {
            for (int l = 0; l < n; ++l) sha256_compress_lanes<1>(states + l, blocks + l);
        }
    }
#endif
};

// ---- the scheduler -----------------------------------------------------------------

// Where one message is: its data blocks, then its padded tail (1 or 2 blocks,
// copied here), then the outer hash's one block. The state is the inner hash's
// until the tail is done, then the outer one's.
template <class H>
struct Lane {
    const HmacMessage* msg = nullptr;
    std::size_t offset = 0;
    enum Phase : std::uint8_t { data, tail, outer, done } phase = done;
    unsigned tail_blocks = 0, tail_next = 0;
    std::uint32_t state[H::kWords]{};
    alignas(16) std::uint8_t pad[2 * kBlock]{};  // the inner tail, later the outer block
};

template <class H>
void start(Lane<H>& lane, const HmacMessage& msg, const std::uint32_t* inner) {
    lane.msg = &msg;
    lane.offset = 0;
    lane.phase = Lane<H>::data;
    std::memcpy(lane.state, inner, sizeof lane.state);
}

// The next block to compress into lane.state, or nullptr when the message is
// finished (its MAC then written out).
template <class H>
const std::uint8_t* next_block(Lane<H>& lane, const std::uint32_t* outer) {
    const HmacMessage& msg = *lane.msg;
    if (lane.phase == Lane<H>::data) {
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
        lane.phase = Lane<H>::tail;
    }
    if (lane.phase == Lane<H>::tail) {
        if (lane.tail_next < lane.tail_blocks) return lane.pad + kBlock * lane.tail_next++;
        // The inner hash is done: its digest is the outer hash's message.
        std::memset(lane.pad, 0, kBlock);
        for (int i = 0; i < H::kWords; ++i) store_be32(lane.pad + 4 * i, lane.state[i]);
        lane.pad[H::kDigest] = 0x80;
        store_be64(lane.pad + kBlock - 8, (kBlock + H::kDigest) * 8);
        std::memcpy(lane.state, outer, sizeof lane.state);
        lane.phase = Lane<H>::outer;
        return lane.pad;
    }
    if (lane.phase == Lane<H>::outer) {
        std::uint8_t digest[H::kDigest];
        for (int i = 0; i < H::kWords; ++i) store_be32(digest + 4 * i, lane.state[i]);
        std::memcpy(msg.out, digest, msg.out_len);
        secure_zero(digest, sizeof digest);
        lane.phase = Lane<H>::done;  // compute_lanes() zeroes the lanes when the batch is done
    }
    return nullptr;
}

// A small multi-buffer scheduler: H::kLanes messages in flight; a lane whose message
// is finished takes the next one, so lanes stay full until the batch runs out.
template <class H>
void compute_lanes(const std::uint32_t* inner, const std::uint32_t* outer, bool sha_ni,
                   std::span<const HmacMessage> messages) {
    std::array<Lane<H>, H::kLanes> lanes;
    std::size_t next = 0;
    for (;;) {
        std::uint32_t* states[H::kLanes];
        const std::uint8_t* blocks[H::kLanes];
        int n = 0;
        for (Lane<H>& lane : lanes) {
            const std::uint8_t* block = lane.phase == Lane<H>::done ? nullptr : next_block(lane, outer);
            while (!block && next < messages.size()) {
                start(lane, messages[next++], inner);
                block = next_block(lane, outer);
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
        if (sha_ni) {
            H::compress_sha_ni(n, states, blocks);
            continue;
        }
#endif
        (void)sha_ni;
        for (int l = 0; l < n; ++l) H::compress(states[l], blocks[l]);
    }
}

// RFC 2104's keyed starting states: the hash of one block of key XOR ipad, and of opad.
template <class H>
void key_states(const std::uint8_t* key, std::size_t key_len, std::uint32_t* inner, std::uint32_t* outer) {
    std::array<std::uint8_t, kBlock> k{};
    if (key_len > kBlock) {
        H::digest(key, key_len, k.data());
    } else if (key_len) {
        std::memcpy(k.data(), key, key_len);
    }
    std::array<std::uint8_t, kBlock> block;
    for (std::size_t i = 0; i < kBlock; ++i) block[i] = k[i] ^ 0x36;
    std::memcpy(inner, H::kIv, sizeof H::kIv);
    H::compress(inner, block.data());
    for (std::size_t i = 0; i < kBlock; ++i) block[i] = k[i] ^ 0x5c;
    std::memcpy(outer, H::kIv, sizeof H::kIv);
    H::compress(outer, block.data());
    secure_zero(k.data(), k.size());
    secure_zero(block.data(), block.size());
}

}  // namespace

HmacLanes::~HmacLanes() {
    secure_zero(inner_, sizeof inner_);
    secure_zero(outer_, sizeof outer_);
}

void HmacLanes::set_key(HmacLaneHash hash, const std::uint8_t* key, std::size_t key_len, bool allow_sha_ni) {
    hash_ = hash;
    secure_zero(inner_, sizeof inner_);
    secure_zero(outer_, sizeof outer_);
    if (hash == HmacLaneHash::sha1) {
        key_states<Sha1>(key, key_len, inner_, outer_);
    } else {
        key_states<Sha256>(key, key_len, inner_, outer_);
    }
    use_sha_ni_ = false;
#if defined(__x86_64__)
    use_sha_ni_ = allow_sha_ni && detect_cpu_features().sha_ni;
#endif
    (void)allow_sha_ni;
}

bool HmacLanes::worth_using(HmacLaneHash hash) {
    const char* force = std::getenv(hash == HmacLaneHash::sha1 ? "ESPVPN_SHA1_LANES" : "ESPVPN_SHA256_LANES");
    if (force && *force) return force[0] == '1';
    const CpuFeatures f = detect_cpu_features();
    return f.sha_ni && f.amd;
}

void HmacLanes::compute(std::span<const HmacMessage> messages) const {
    if (hash_ == HmacLaneHash::sha1) {
        compute_lanes<Sha1>(inner_, outer_, use_sha_ni_, messages);
    } else {
        compute_lanes<Sha256>(inner_, outer_, use_sha_ni_, messages);
    }
}

}  // namespace espvpn
