// One-time passwords for --token-mode=hotp|totp: HOTP (RFC 4226) and TOTP
// (RFC 6238) codes over HMAC-SHA1/256/512 (Nettle), and openconnect's
// --token-secret spellings of the key. Pure: no clock, no files (the caller
// passes the time and stores the HOTP counter).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn {

enum class OtpHash { sha1, sha256, sha512 };

// HOTP value of `counter`: dynamic truncation, `digits` decimal digits (6..9), zero-padded.
Secret hotp_code(const Secret& key, OtpHash hash, std::uint64_t counter, int digits = 6);
// TOTP value at `unix_time` with a `step`-second time step (T0 = 0).
Secret totp_code(const Secret& key, OtpHash hash, std::int64_t unix_time, int step = 30, int digits = 6);

// A --token-secret as openconnect reads it: an optional "sha1:", "sha256:" or "sha512:"
// (case-insensitive), then "base32:KEY", "0xHEX" or the raw key bytes; for HOTP an
// optional ",COUNTER" at the end. Trailing white space (a file's newline) is ignored.
struct OtpSecret {
    enum class Format { base32, hex, raw };
    OtpHash hash = OtpHash::sha1;
    Format format = Format::raw;
    Secret key;
    std::uint64_t counter = 0;  // HOTP: the next counter value to use
};
Result<OtpSecret> parse_otp_secret(std::string_view text, bool hotp);

// The secret written back after an HOTP code is used, in the format it was read
// in ("base32:..." re-encoded, "0x..." lower-case hex, or raw), with ",COUNTER"
// appended (as openconnect rewrites a token file); the hash prefix is kept.
Secret format_otp_secret(const OtpSecret& secret);

}  // namespace espvpn
