// Base64 (RFC 4648, standard alphabet) as GP uses it for saml-request.
#pragma once

#include <string>
#include <string_view>

#include "protocols/base/result.h"

namespace espvpn::gp {

// Ignores ASCII whitespace (the servers wrap long values); padding optional.
Result<std::string> base64_decode(std::string_view text);

}  // namespace espvpn::gp
