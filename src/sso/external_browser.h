// Single sign-on in the user's own browser (docs/SSO.md). espvpn opens the
// identity provider's page with xdg-open (or --external-browser=PROGRAM) as the
// invoking user, never as root for someone else, and waits for the first of:
//   - a globalprotectcallback: URL from the scheme handler, over the per-user
//     callback socket (src/sso/callback_socket.h: peer credentials checked);
//   - AnyConnect's external-browser flow: one HTTP GET on 127.0.0.1/::1:PORT
//     (SsoFinish.loopback_port), the token in its path /api/sso/<token>;
//   - a line pasted on stdin (the callback URL, or the final URL / token);
//   - the timeout (--sso-timeout), SIGINT/SIGTERM.
// With no display and no explicit program, no browser is started: the URL is
// printed and the callback is expected on stdin or from the handler.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "src/session/sso_browser.h"

namespace espvpn::sso {

struct ExternalBrowserOptions {
    std::string program;  // --external-browser=PROG, "" = xdg-open (when there is a display)
    std::chrono::seconds timeout{300};  // --sso-timeout
    bool read_stdin = true;
    // false: never start a browser, print the URL (set when no display is found and
    // no program was given; make_external_browser decides it when left at true).
    bool start_browser = true;
};

std::unique_ptr<session::SsoBrowser> make_external_browser(ExternalBrowserOptions options);

// openconnect's AnyConnect external-browser listener port (the server's
// sso-v2-login URL names it in its redirect back to localhost).
constexpr std::uint16_t kAnyConnectSsoPort = 29786;

}  // namespace espvpn::sso
