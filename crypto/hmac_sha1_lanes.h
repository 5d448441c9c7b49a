// HMAC-SHA1 of several independent messages at once.
//
// SHA-1 is serial inside a message: each SHA1RNDS4 (four rounds) waits for the
// previous one's result. On CPUs where that instruction's latency is several
// times its issue interval (AMD Zen 4/5: about 4 cycles latency, one issued
// every ~1.2), one message leaves the SHA unit mostly idle, as one CBC chain
// leaves the AES unit idle (crypto/aes_cbc_lanes.h). The ESP sealer and opener
// have batches of independent packets, so this hashes up to kLanes of them side
// by side: the rounds of one lane run while the others' are in flight.
// ("Multi-buffer" hashing; neither GnuTLS nor Nettle offers it.)
//
// Usage:
//   HmacSha1Lanes mac;
//   mac.set_key(key.data(), key.size());
//   HmacSha1Message msgs[] = {{data0, len0, icv0, 12}, {data1, len1, icv1, 12}};
//   mac.compute(msgs);      // every icv = the first 12 bytes of HMAC-SHA1(key, data)
// The output is exactly RFC 2104 HMAC-SHA1 (truncated as asked). Without the
// SHA extensions (SHA-NI) it is Nettle's SHA-1 one message at a time.
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

struct HmacSha1Message {
    const std::uint8_t* data;
    std::size_t len;
    std::uint8_t* out;    // out_len bytes are written here
    std::size_t out_len;  // 1..20
};

class HmacSha1Lanes {
public:
    static constexpr std::size_t kLanes = 4;

    HmacSha1Lanes() = default;
    HmacSha1Lanes(const HmacSha1Lanes&) = delete;
    HmacSha1Lanes& operator=(const HmacSha1Lanes&) = delete;
    ~HmacSha1Lanes();

    // Any key length (RFC 2104: a key longer than 64 bytes is hashed first).
    // allow_sha_ni = false takes the portable path on any CPU (for tests).
    void set_key(const std::uint8_t* key, std::size_t key_len, bool allow_sha_ni = true);
    void compute(std::span<const HmacSha1Message> messages) const;

    // True where lanes were measured faster than one message at a time: SHA-NI
    // on an AMD CPU (Zen 4 and 5 measured). ESPVPN_SHA1_LANES=0/1 overrides
    // (for benchmarks and tests).
    static bool worth_using();

private:
    std::uint32_t inner_[5]{};  // SHA-1 state after the key XOR ipad block
    std::uint32_t outer_[5]{};  // ... after the key XOR opad block
    bool use_sha_ni_ = false;
};

}  // namespace espvpn
