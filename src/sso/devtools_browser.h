// The driven browser (--sso-browser=COMMAND, docs/SSO.md): espvpn starts Chromium
// or Chrome itself with a fresh private profile and the DevTools protocol on a pipe
// (fds 3 and 4, NUL-separated JSON), opens the login, watches every response,
// navigation and cookie, and closes the browser when the SsoFinish is met. It sees
// responses (GP ACS headers and bodies, AnyConnect's final URL and token cookie) but
// no external callbacks.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "src/session/sso_browser.h"

namespace espvpn::sso {

struct DrivenBrowserOptions {
    // --sso-browser=COMMAND: program and arguments split on spaces, e.g.
    // "chromium --headless=new --ignore-certificate-errors". espvpn adds
    // --remote-debugging-pipe, --user-data-dir and the quiet-start flags.
    std::string command;
    std::chrono::seconds timeout{300};  // --sso-timeout
    // How long the browser may take to exit after Browser.close before it is killed.
    std::chrono::milliseconds close_grace{3000};
};

// The browser runs as the invoking user when espvpn is root under sudo/pkexec
// (SUDO_UID/PKEXEC_UID, with that user's HOME and display variables), else as
// espvpn's own user. Errors of run() say what happened: the timeout, the window
// closed, Ctrl-C, a browser that does not speak the DevTools protocol.
std::unique_ptr<session::SsoBrowser> make_driven_browser(DrivenBrowserOptions options);

}  // namespace espvpn::sso
