// The end of a SAML (or CAS) login (docs/protocols/globalprotect.md §4): the ACS reply carries the
// user name and one proof cookie in HTTP headers, or as XML-like tags in the
// body (sometimes only inside an HTML comment); newer servers instead land on
// a globalprotectcallback:<data> URL. The result goes into the next login
// request as GpCredentials{user, secret, secret_field}.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::gp {

struct GpSamlResult {
    std::string username;
    std::string field;  // "prelogin-cookie", "portal-userauthcookie", or "token" (CAS)
    Secret value;
};

using GpHeaderList = std::vector<std::pair<std::string, std::string>>;

// Headers win over the body. Errors: status not 1, no user name, no cookie,
// or a cookie of 5 characters or fewer (yuezk's sanity rule).
Result<GpSamlResult> parse_saml_acs_result(const GpHeaderList& headers, std::string_view body);

// "globalprotectcallback:<data>": base64 of an ACS body, or a CAS form
// "cas-as=1&un=<user>&token=<token>" (possibly URL-encoded, possibly after '/').
Result<GpSamlResult> parse_globalprotect_callback(std::string_view url);

}  // namespace espvpn::gp
