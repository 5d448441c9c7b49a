// NTLM proxy authentication (sans-IO), as [MS-NLMP] describes it: the NEGOTIATE
// (type 1) message, the proxy's CHALLENGE (type 2) parsed and bounds-checked, and the
// AUTHENTICATE (type 3) message with an NTLMv2 response (NTOWFv2, NTProofStr, the
// client blob with the proxy's target info and a timestamp). No session security:
// HTTP proxy authentication only proves the password, nothing is signed or sealed
// afterwards, so no key exchange and no MIC are sent (MsvAvFlags is not set).
// src/io/proxy_tunnel drives it on one kept-alive connection.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::proxy::ntlm {

using Bytes = std::vector<std::uint8_t>;

// NEGOTIATE_MESSAGE: Unicode, NTLM, extended session security, request target; no
// domain or workstation names (they are optional and would only tell the proxy more).
Bytes negotiate_message();

struct Challenge {
    std::uint32_t flags = 0;
    std::array<std::uint8_t, 8> server_challenge{};
    std::optional<std::string> target_name;  // UTF-8; nullopt: absent or malformed
    Bytes target_info;                        // the AV_PAIR list as sent (may be empty)
    std::optional<std::uint64_t> timestamp;   // MsvAvTimestamp (FILETIME), when the proxy sent one
};

// Parses a CHALLENGE_MESSAGE. Every length and offset is checked against the message:
// a malformed target info is an error (NTLMv2 needs it); a malformed target name only
// leaves target_name empty (squid's ntlm_fake_auth sends a garbage offset for it).
Result<Challenge> parse_challenge(std::span<const std::uint8_t> message);

// "DOMAIN\user" -> {DOMAIN, user}; "user@domain" stays whole with an empty domain
// ([MS-NLMP] 3.1.5.1.2: a UPN user name goes with an empty DomainName); a plain user
// takes the proxy's target name as its domain (as openconnect does).
struct Identity {
    std::string user;
    std::string domain;
};
Result<Identity> split_user(std::string_view proxy_user, const Challenge& challenge);

// NTOWFv2 = HMAC-MD5(MD4(UTF-16LE(password)), UTF-16LE(uppercase(user) + domain)).
Result<Secret> ntowfv2(const Secret& password, std::string_view user, std::string_view domain);

struct V2Response {
    Bytes nt_response;  // NTProofStr + the client blob
    Bytes lm_response;  // LMv2 (HMAC + client challenge), or 24 zeros with a proxy timestamp
    std::array<std::uint8_t, 16> nt_proof{};
    std::array<std::uint8_t, 16> session_base_key{};
};
// The NTLMv2 responses to `challenge` for the key `response_key` (from ntowfv2).
// `timestamp` is used when the challenge carries none; `client_challenge` is 8 random bytes.
V2Response v2_response(const Secret& response_key, const Challenge& challenge, std::uint64_t timestamp,
                       std::span<const std::uint8_t, 8> client_challenge);

// The AUTHENTICATE_MESSAGE for `identity` with `password`. A Secret: it proves the password.
Result<Secret> authenticate_message(const Challenge& challenge, const Identity& identity, const Secret& password,
                                    std::string_view workstation, std::uint64_t timestamp,
                                    std::span<const std::uint8_t, 8> client_challenge);

// Now as a Windows FILETIME (100-ns ticks since 1601-01-01 UTC), from Unix seconds.
std::uint64_t filetime_from_unix(std::int64_t unix_seconds, std::uint32_t nanoseconds);

// The base64 token of a "Proxy-Authenticate: NTLM <token>" value, decoded; an error
// when it is not base64 or longer than 64 KiB.
Result<Bytes> decode_token(std::string_view base64);

}  // namespace espvpn::proxy::ntlm
