#include "crypto/key_history.h"

#include <gnutls/crypto.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include <algorithm>
#include <stdexcept>

namespace espvpn::crypto {

KeyHistory::KeyHistory() : mac_key_(SHA256_DIGEST_SIZE) {
    if (gnutls_rnd(GNUTLS_RND_KEY, mac_key_.reveal_mutable().data(), mac_key_.size()) != 0)
        throw std::runtime_error("no random bytes for the key history");
}

KeyHistory::Fingerprint KeyHistory::fingerprint(std::span<const std::uint8_t> key) const {
    hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, mac_key_.size(), mac_key_.reveal().data());
    hmac_sha256_update(&h, key.size(), key.data());
    Fingerprint out{};
    hmac_sha256_digest(&h, out.size(), out.data());
    secure_zero(&h, sizeof h);
    return out;
}

bool KeyHistory::seen(std::span<const std::uint8_t> key) const {
    const Fingerprint f = fingerprint(key);
    return std::any_of(seen_.begin(), seen_.end(),
                       [&](const Fingerprint& s) { return memeql_sec(s.data(), f.data(), f.size()); });
}

bool KeyHistory::remember(std::span<const std::uint8_t> key) {
    if (seen(key)) return false;
    seen_.push_back(fingerprint(key));
    return true;
}

}  // namespace espvpn::crypto
