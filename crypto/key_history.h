// KeyHistory: the encryption keys a session has used, as fingerprints (HMAC-SHA256
// under a random key of this object's own, in Secret memory), never as the keys.
// An ESP SA's AES-GCM nonce (and its sequence numbers) start again with every new
// SA: a gateway that hands out a key it gave before makes us reuse nonces under
// it, which gives away the GCM authentication key and the XOR of the plaintexts.
// The session refuses such an SA, in either direction, at rekey and at reconnect.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "crypto/secret.h"

namespace espvpn::crypto {

class KeyHistory {
public:
    KeyHistory();

    bool seen(std::span<const std::uint8_t> key) const;
    // Remembers the key; false when it was seen before.
    bool remember(std::span<const std::uint8_t> key);
    std::size_t size() const { return seen_.size(); }

private:
    using Fingerprint = std::array<std::uint8_t, 32>;
    Fingerprint fingerprint(std::span<const std::uint8_t> key) const;

    Secret mac_key_;
    std::vector<Fingerprint> seen_;  // one per SA direction: a few per hour at most
};

}  // namespace espvpn::crypto
