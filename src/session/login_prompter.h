// Where a login gets what only the user knows. The CLI reads the terminal or
// standard input (src/cli/terminal_prompter.h); tests and the NetworkManager
// plugin supply their own.
#pragma once

#include <string>
#include <string_view>

#include "crypto/result.h"
#include "crypto/secret.h"

namespace espvpn::session {

class LoginPrompter {
public:
    virtual ~LoginPrompter() = default;
    // A visible field, e.g. the user name.
    virtual Result<std::string> ask_text(std::string_view prompt) = 0;
    // A hidden field: password, OTP, or a SAML cookie.
    virtual Result<Secret> ask_secret(std::string_view prompt) = 0;
    // A message the user must see (e.g. the SAML URL to open).
    virtual void show(std::string_view message) = 0;
};

}  // namespace espvpn::session
