// PKCS#11 URIs (RFC 7512) as -c/-k/--mca-* values: "pkcs11:token=...;object=...?pin-value=...".
// A URI may carry the token's PIN (pin-value) or where to read it (pin-source); every
// message that names a certificate or key goes through printable_key_name, so no PIN
// reaches a terminal or a log.
#pragma once

#include <string>
#include <string_view>

namespace espvpn {

// True for "pkcs11:..." (scheme in any case).
bool is_pkcs11_uri(std::string_view name);

// The name to print: a PKCS#11 URI without its pin-value and pin-source attributes
// (in the path or the query, the attribute name percent-decoded before it is
// compared); anything else unchanged.
std::string printable_key_name(std::string_view name);

// True when the URI carries its PIN (pin-value) or where to read it (pin-source).
bool pkcs11_uri_has_pin(std::string_view name);

}  // namespace espvpn
