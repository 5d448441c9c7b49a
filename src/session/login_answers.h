// How every login field gets its value, for both protocols, in openconnect's
// order: a soft token answers the fields it may (LoginField::token), then
// -F/--form-entry FORM:FIELD=VALUE, then the prompter (terminal or stdin).
// Selects also take a preset (--authgroup) and are matched as openconnect
// matches them: a label equal (case-insensitive), else the one label the
// answer is a prefix of.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "src/session/login_prompter.h"
#include "src/session/soft_token.h"

namespace espvpn::session {

struct FormEntry {
    std::string form;
    std::string field;
    std::string value;
};
// "FORM:FIELD=VALUE" (the value may contain ':' and '=').
Result<FormEntry> parse_form_entry(std::string_view text);

// The choice `answer` names (label equal, else a unique label prefix, else a value
// equal), or an error naming the field and listing the labels.
Result<const LoginField::Choice*> match_choice(const LoginField& field, std::string_view answer);

class LoginAnswers {
public:
    LoginAnswers(LoginPrompter& prompter, std::vector<FormEntry> entries, std::shared_ptr<SoftToken> token)
        : prompter_(prompter), entries_(std::move(entries)), token_(std::move(token)) {}

    // A text or secret field.
    Result<Secret> fill(const LoginField& field);
    // A select: `preset` (e.g. --authgroup) first, else -F, else asked; a single
    // choice is taken without asking. A preset that matches nothing is an error.
    Result<const LoginField::Choice*> choose(const LoginField& field, std::string_view preset = {});

    // The -F value for FORM:FIELD, if one was given.
    const std::string* entry(std::string_view form, std::string_view field) const;
    bool has_token() const { return token_ != nullptr; }

private:
    LoginPrompter& prompter_;
    std::vector<FormEntry> entries_;
    std::shared_ptr<SoftToken> token_;
    bool token_exhausted_ = false;
};

}  // namespace espvpn::session
