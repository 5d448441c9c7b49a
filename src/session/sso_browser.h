// Where a login hands a single sign-on (SAML/OIDC at the identity provider) to a
// browser and gets its result back (docs/SSO.md). The protocol's login says what
// to open and what marks the end; an SsoBrowser opens the user's own browser or
// drives one, waits, and returns what it saw. The login then parses that with
// the protocol's sans-IO code (gp::parse_globalprotect_callback,
// gp::parse_saml_acs_result, the AnyConnect sso-v2 token).
//
// Two kinds (src/sso/):
//   external  the user's browser, started as the invoking user; the result comes
//             back through the globalprotectcallback: handler (a local socket
//             that checks the peer's credentials), a loopback HTTP listener
//             (AnyConnect's external-browser flow), or a line pasted on stdin.
//   driven    a browser espvpn starts with a private profile and watches through
//             the DevTools protocol: it sees every response and cookie.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::session {

// What to show the user.
struct SsoStart {
    std::string url;     // a URL to open (GP saml-auth-method REDIRECT, AnyConnect sso-v2-login) ...
    std::string html;    // ... or an HTML page to load (GP POST: a form that submits itself); url is "" then
    std::string server;  // who asks, for messages: "vpn.example.com (portal)"
};

// What ends the login. A browser checks the parts it can see; the others are ignored.
struct SsoFinish {
    // GlobalProtect: a response carrying saml-auth-status (in headers, or in the body,
    // maybe inside an HTML comment), or a navigation to a globalprotectcallback: URL.
    bool gp_acs = false;
    // AnyConnect, driven: the browser reaches a URL starting with final_url; the
    // token is then the cookie named token_cookie.
    std::string final_url;
    std::string token_cookie;
    // ... and a cookie of this name (sso-v2-error-cookie-name) set by then means the
    // identity provider refused the login: its value is the reason, shown to the user.
    std::string error_cookie;
    // AnyConnect, external: the identity provider redirects the browser to
    // http://localhost:<loopback_port>/...; the token is in that request's path.
    std::uint16_t loopback_port = 0;
};

// What the browser gave back. Secrets stay in Secret: never logged, not even at -vvv.
struct SsoResult {
    enum class Kind {
        callback_url,  // url = "globalprotectcallback:..." (from the handler socket or pasted)
        acs_response,  // a GP ACS response: url, headers, body
        token,         // AnyConnect: token
    };
    Kind kind = Kind::callback_url;
    Secret url;
    std::vector<std::pair<std::string, std::string>> headers;
    Secret body;
    Secret token;
};

class SsoBrowser {
public:
    virtual ~SsoBrowser() = default;
    // Opens `start` and waits until `finish` is met, the timeout passes or the user
    // gives up (Ctrl-C, the browser closed); errors say which, in words a user acts on.
    virtual Result<SsoResult> run(const SsoStart& start, const SsoFinish& finish) = 0;
    // The ends this browser can see (AnyConnect advertises only the flows it can finish):
    virtual bool sees_responses() const = 0;  // acs_response and final_url + token_cookie (driven)
    virtual bool sees_callbacks() const = 0;  // globalprotectcallback: and loopback_port (external)
};

}  // namespace espvpn::session
