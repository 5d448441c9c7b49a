// Where a login gets what only the user knows. The CLI reads the terminal or
// standard input (src/cli/terminal_prompter.h); tests and the NetworkManager
// plugin supply their own. What the command line already answers (-F, a soft
// token, --authgroup) is applied first, by LoginAnswers (src/session/login_answers.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::session {

// One field of a login form, named as openconnect names it for -F FORM:FIELD=VALUE.
struct LoginField {
    enum class Kind { text, secret, select };
    struct Choice {
        std::string value;  // what is sent
        std::string label;  // what the user sees, types and -F/--authgroup match
    };
    Kind kind = Kind::text;
    // GlobalProtect: "_login" (user, passwd), "_challenge" (passwd), "_portal" (gateway);
    // AnyConnect: the form's <auth id="..."> ("main", "challenge", ...).
    std::string form;
    std::string name;
    std::string label;             // the prompt, e.g. "Password:"
    std::vector<Choice> choices;   // select only
    bool token = false;            // a one-time password a --token-mode generator may answer
};

class LoginPrompter {
public:
    virtual ~LoginPrompter() = default;
    // A visible field, e.g. the user name.
    virtual Result<std::string> ask_text(std::string_view prompt) = 0;
    // A hidden field: password, OTP, or a SAML cookie.
    virtual Result<Secret> ask_secret(std::string_view prompt) = 0;
    // A list: the line typed (a label or a prefix of one). By default asked as text
    // with the choices in the prompt, "GROUP: [First Group|group2]:" as openconnect shows it.
    virtual Result<std::string> ask_choice(std::string_view label, const std::vector<std::string>& choices) {
        std::string prompt(label);
        prompt += " [";
        for (std::size_t i = 0; i < choices.size(); ++i) prompt += (i ? "|" : "") + choices[i];
        prompt += "]:";
        return ask_text(prompt);
    }
    // A message the user must see (e.g. the SAML URL to open).
    virtual void show(std::string_view message) = 0;
};

}  // namespace espvpn::session
