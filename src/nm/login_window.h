// nm-espvpn-auth-dialog's GTK4 login window (classic protocol, a display there): it
// runs `espvpn --authenticate --prompt-fd N` and shows each of espvpn's prompt
// records (protocols/prompt/prompt_channel.h) as the server words it: a text or
// password entry, a drop-down for a list, a banner to accept, the server's messages
// and errors as plain text; single sign-on as a "continue in your browser" page.
// Enter submits, Escape cancels, the first field has the focus. A run refused for
// its credentials is started again (3 runs), another failure offers "Try again".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "src/nm/login_flow.h"

namespace espvpn::nm {

struct LoginWindowOptions {
    std::string connection_name;
    std::string gateway;                // shown in the heading
    std::vector<std::string> argv;      // espvpn --authenticate ... (--prompt-fd is added)
    bool single_sign_on = false;        // the browser logs in: "continue in your browser"
};

// Whether a window can be drawn (GTK initialises on a display).
bool login_window_available();

// Runs the login in the window: the secrets for NetworkManager, or an error (cancelled,
// failed) after the window is gone.
Result<std::map<std::string, Secret>> run_login_window(const LoginWindowOptions& options, LoginFlow& flow);

}  // namespace espvpn::nm
