// --servercert as openconnect matches it: "pin-sha256:BASE64" (SHA-256 of the
// server's SubjectPublicKeyInfo), "sha256:HEX" (the same digest in hex),
// "sha1:HEX" (SHA-1 of the SubjectPublicKeyInfo), or bare HEX (SHA-1 of the whole
// certificate, what older openconnect printed). Any prefix of at least 4
// characters of the digest matches; hex in either case, base64 as written.
#pragma once

#include <gnutls/gnutls.h>

#include <string>
#include <string_view>

#include "protocols/base/result.h"

namespace espvpn::io {

// The four digests of one server certificate, in the spellings --servercert takes.
struct ServerFingerprints {
    std::string pin_sha256;     // base64
    std::string sha256_hex;     // lower-case hex
    std::string sha1_hex;       // lower-case hex
    std::string cert_sha1_hex;  // lower-case hex
    std::string cert_md5_hex;   // lower-case hex, "" where MD5 is unavailable; not a pin (the CSD
                                // host scan reports it, openconnect's -certhash)
    std::string pin() const { return "pin-sha256:" + pin_sha256; }
    // "pin-sha256:..., sha256:..., sha1:..., <cert SHA-1>" for an error a user can paste from.
    std::string all_forms() const;
};
Result<ServerFingerprints> fingerprints_of(const gnutls_datum_t& der_certificate);

struct ServerCertPin {
    enum class Kind { pin_sha256, sha256, sha1, cert_sha1 };
    Kind kind = Kind::pin_sha256;
    std::string digest;  // after the prefix; hex lower-cased
    bool matches(const ServerFingerprints& fp) const;
    // How much of the digest the pin fixes: 4 bits a hex digit, 6 a base64 one, at
    // most the digest's size. Below 128 a server can make a certificate that matches.
    unsigned bits() const;
};
constexpr unsigned kStrongPinBits = 128;
// Refuses an unknown "prefix:", characters that are not hex (or base64 for
// pin-sha256:), fewer than 4 or more than the digest's characters.
Result<ServerCertPin> parse_server_cert_pin(std::string_view text);

}  // namespace espvpn::io
