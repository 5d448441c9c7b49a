// The browser a login hands single sign-on to (docs/SSO.md), from the command
// line: --external-browser[=PROGRAM] (the user's browser, src/sso/external_browser.h),
// --sso-browser=COMMAND (a browser espvpn drives, src/sso/devtools_browser.h), or
// by default the external flow: the user's browser when a display is found, else
// the URL printed and the callback pasted. Both protocols' logins take the result
// as a std::shared_ptr<session::SsoBrowser> in their settings.
#pragma once

#include <memory>

#include "src/cli/options.h"
#include "src/session/sso_browser.h"

namespace espvpn::cli {

// Null when the login should keep the manual hand-off: --passwd-on-stdin with no
// browser option (the SAML cookie comes on stdin, as with openconnect and gp-saml-gui).
std::shared_ptr<session::SsoBrowser> sso_browser(const ClientOptions& options);

}  // namespace espvpn::cli
