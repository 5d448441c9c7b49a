// HMAC-SHA1 and HMAC-SHA256 of several independent messages at once.
//
// SHA-1 and SHA-256 are serial inside a message: each SHA1RNDS4 (four rounds)
// or SHA256RNDS2 (two) waits for the previous one's result. On CPUs where that
// instruction's latency is several times its issue interval (AMD Zen 4/5:
// SHA1RNDS4 about 4 cycles latency, issued every ~1.2; SHA256RNDS2 about 2.5,
// every ~1.2), one message leaves the SHA unit mostly idle, as one CBC chain
// leaves the AES unit idle (crypto/aes_cbc_lanes.h). The ESP sealer and opener
// have batches of independent packets, so this hashes several of them side by
// side: the rounds of one lane run while the others' are in flight.
// ("Multi-buffer" hashing; neither GnuTLS nor Nettle offers it.)
//
// Usage:
//   HmacLanes mac;
//   mac.set_key(HmacLaneHash::sha256, key.data(), key.size());
//   HmacMessage msgs[] = {{data0, len0, icv0, 16}, {data1, len1, icv1, 16}};
//   mac.compute(msgs);      // every icv = the first 16 bytes of HMAC-SHA256(key, data)
// The output is exactly RFC 2104 HMAC (truncated as asked). Without the SHA
// extensions (SHA-NI) it is Nettle's compression function, one message at a time.
//
// Whether lanes pay off depends on the CPU, not only on SHA-NI being there: on
// an Intel Xeon (family 6, model 207) one SHA-1 stream already filled the SHA
// unit and four lanes were 10 % slower (docs/PERFORMANCE.md, session 16). So
// worth_using() says whether to prefer this over the one-at-a-time HMAC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace espvpn {

struct HmacMessage {
    const std::uint8_t* data;
    std::size_t len;
    std::uint8_t* out;    // out_len bytes are written here
    std::size_t out_len;  // 1..digest size (20 for SHA-1, 32 for SHA-256)
};

enum class HmacLaneHash : std::uint8_t { sha1, sha256 };

class HmacLanes {
public:
    HmacLanes() = default;
    HmacLanes(const HmacLanes&) = delete;
    HmacLanes& operator=(const HmacLanes&) = delete;
    ~HmacLanes();

    // Any key length (RFC 2104: a key longer than 64 bytes is hashed first).
    // allow_sha_ni = false takes the portable path on any CPU (for tests).
    void set_key(HmacLaneHash hash, const std::uint8_t* key, std::size_t key_len, bool allow_sha_ni = true);
    // Messages in flight at once: SHA-1 4, SHA-256 2 (a SHA-256 lane holds 6 XMM registers;
    // more lanes spill and gained nothing on Zen 4).
    void compute(std::span<const HmacMessage> messages) const;

    // True where lanes were measured faster than one message at a time: SHA-NI on an
    // AMD CPU (Zen 4 and 5 measured). ESPVPN_SHA1_LANES=0/1 and ESPVPN_SHA256_LANES=0/1
    // override (for benchmarks and tests).
    static bool worth_using(HmacLaneHash hash);

private:
    HmacLaneHash hash_ = HmacLaneHash::sha1;
    std::uint32_t inner_[8]{};  // hash state after the key XOR ipad block (SHA-1 uses 5 words)
    std::uint32_t outer_[8]{};  // ... after the key XOR opad block
    bool use_sha_ni_ = false;
};

}  // namespace espvpn
