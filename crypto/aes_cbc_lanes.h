// AES-CBC encryption of several independent messages at once.
//
// CBC encryption is serial inside a message: each block's AES waits for the
// previous block's result, so one message keeps the AES unit busy one cycle in
// its latency (3-4 cycles per round on current x86). The ESP sealer has a batch
// of independent packets, so it encrypts up to kLanes of them side by side:
// the rounds of one lane run while the others' are in flight. Intel calls this
// "multi-buffer" CBC; neither GnuTLS nor Nettle offers it.
//
// Usage:
//   AesCbcLanes aes;
//   aes.set_key(key.data(), key.size());            // 16 or 32 bytes
//   AesCbcMessage msgs[] = {{iv0, text0, len0}, {iv1, text1, len1}};
//   aes.encrypt(msgs);                             // every text encrypted in place
// Each message: a 16-byte IV (read only), a text whose length is a multiple of
// 16 (it may be 0), encrypted in place. The output is exactly CBC's (RFC 3602).
// x86-64 with AES-NI: interleaved lanes; any other CPU: Nettle, one message at
// a time (the same bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <nettle/aes.h>

namespace espvpn {

struct AesCbcMessage {
    const std::uint8_t* iv;
    std::uint8_t* text;
    std::size_t len;
};

class AesCbcLanes {
public:
    static constexpr std::size_t kLanes = 8;

    AesCbcLanes() = default;
    AesCbcLanes(const AesCbcLanes&) = delete;
    AesCbcLanes& operator=(const AesCbcLanes&) = delete;
    ~AesCbcLanes();

    // key_len 16 (AES-128) or 32 (AES-256); false for any other length.
    bool set_key(const std::uint8_t* key, std::size_t key_len);
    void encrypt(std::span<const AesCbcMessage> messages) const;

    // True when encrypt() interleaves lanes (AES-NI found); false: Nettle.
    bool interleaved() const { return use_aesni_; }

private:
    // The expanded encryption key, 16 bytes per round key, in the byte order
    // FIPS-197 writes them (what AESENC takes from memory).
    alignas(16) std::uint8_t round_keys_[15 * 16]{};
    unsigned rounds_ = 0;
    bool use_aesni_ = false;
    aes128_ctx nettle128_{};
    aes256_ctx nettle256_{};
};

}  // namespace espvpn
