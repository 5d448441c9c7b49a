// STRAP (Cisco Secure Client 5, as openconnect 9.x does it): in the external-browser single
// sign-on the server encrypts the token to a key the client sent in
// X-AnyConnect-STRAP-Pubkey / X-AnyConnect-STRAP-DH-Pubkey, and the identity provider's last
// redirect carries it to http://localhost:29786/api/sso/<base64 blob>. The blob: 00 01, then
// TLVs (16-bit tag, 16-bit length): 1 the server's ephemeral key (SPKI DER), 2 the 12-byte GCM
// tag, 3 the ciphertext, 4 the 12-byte IV (crypto/ecies_p256.h opens it).
#pragma once

#include <optional>
#include <string_view>

#include "crypto/ecies_p256.h"
#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::anyconnect {

inline constexpr std::string_view kStrapPubkeyHeader = "X-AnyConnect-STRAP-Pubkey";
inline constexpr std::string_view kStrapDhPubkeyHeader = "X-AnyConnect-STRAP-DH-Pubkey";

// `received`: the loopback request's target ("/api/sso/<blob>?return=..."), or the blob alone,
// percent-encoded or not, base64 or base64url. std::nullopt when it is not a STRAP blob (a server
// that sent the token in the clear); an error when it is one that does not open, or whose token is
// not alphanumeric.
Result<std::optional<Secret>> open_strap_token(const crypto::EciesP256Key& key, std::string_view received);

}  // namespace espvpn::anyconnect
