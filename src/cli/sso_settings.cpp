#include "src/cli/sso_settings.h"

#include "src/sso/devtools_browser.h"
#include "src/sso/external_browser.h"

namespace espvpn::cli {

std::shared_ptr<session::SsoBrowser> sso_browser(const ClientOptions& options) {
    // --sso-browser: the browser espvpn drives (it sees the ACS reply and the token cookie itself).
    if (!options.sso_browser.empty())
        return sso::make_driven_browser({options.sso_browser, std::chrono::seconds(options.sso_timeout_s)});
    if (!options.external_browser && options.passwd_on_stdin) return nullptr;
    sso::ExternalBrowserOptions external;
    external.program = options.external_program;
    external.timeout = std::chrono::seconds(options.sso_timeout_s);
    // stdin is free for a pasted callback unless it carries something else.
    external.read_stdin = !options.passwd_on_stdin && !options.cookie_on_stdin && !options.non_interactive;
    return make_external_browser(std::move(external));
}

}  // namespace espvpn::cli
