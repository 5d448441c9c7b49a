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
    // The PIN of a key on a token (the token checks it; the server never sees it). By
    // default a hidden field; a program's prompter marks it so that no stored
    // password answers it.
    virtual Result<Secret> ask_pin(std::string_view prompt) { return ask_secret(prompt); }
    // A message the user must see (e.g. the SAML URL to open).
    virtual void show(std::string_view message) = 0;

    // The field-aware forms a program's prompter (espvpn --prompt-fd) overrides to
    // see the form, the field's name and kind; by default the prompts above.
    virtual Result<Secret> ask_field(const LoginField& field) {
        if (field.kind == LoginField::Kind::secret) return ask_secret(field.label);
        auto text = ask_text(field.label);
        if (!text) return text.error();
        return Secret::from_string(*text);
    }
    virtual Result<std::string> ask_select(const LoginField& field) {
        std::vector<std::string> labels;
        for (const auto& c : field.choices) labels.push_back(c.label);
        return ask_choice(field.label, labels);
    }
    // A banner the user accepts before the login goes on; an error when declined.
    // A terminal shows it and goes on, as openconnect does.
    virtual Status accept_banner(std::string_view text) {
        show(text);
        return {};
    }
    // The server's message with a form (error: it refused the last answers, e.g.
    // "Login failed"). Logged by the login already; a window shows it beside the form.
    virtual void form_message(std::string_view /*text*/, bool /*error*/) {}
    // Whether a choice the login would make by itself (the portal's preferred
    // gateway) is offered to the user, preselected: a window does, a terminal not.
    virtual bool offers_defaults() const { return false; }
};

}  // namespace espvpn::session
