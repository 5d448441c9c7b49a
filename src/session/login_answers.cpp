#include "src/session/login_answers.h"

#include "protocols/http/message.h"
#include "src/log/logger.h"

namespace espvpn::session {

namespace {

std::string labels_of(const LoginField& f) {
    std::string out;
    for (const auto& c : f.choices) out += (out.empty() ? "" : "|") + c.label;
    return out;
}

std::string field_name(const LoginField& f) { return f.form + ":" + f.name; }

}  // namespace

Result<FormEntry> parse_form_entry(std::string_view text) {
    auto colon = text.find(':');
    auto eq = text.find('=', colon == std::string_view::npos ? 0 : colon);
    if (colon == std::string_view::npos || colon == 0 || eq == std::string_view::npos || eq == colon + 1)
        return make_error("--form-entry: expected FORM:FIELD=VALUE, got '" + std::string(text) + "'");
    return FormEntry{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1, eq - colon - 1)),
                     std::string(text.substr(eq + 1))};
}

Result<const LoginField::Choice*> match_choice(const LoginField& field, std::string_view answer) {
    const LoginField::Choice* prefix = nullptr;
    int prefixes = 0;
    if (!answer.empty()) {
        for (const auto& c : field.choices) {
            const std::string_view label = c.label;
            if (http::iequals(label, answer)) return &c;
            if (http::iequals(label.substr(0, answer.size()), answer)) {
                prefix = &c;
                ++prefixes;
            }
        }
    }
    if (prefixes == 1) return prefix;
    for (const auto& c : field.choices)
        if (c.value == answer) return &c;
    std::string what = field.name == "group_list" ? "auth group" : "choice for " + field_name(field);
    return make_error(what + " \"" + std::string(answer) + "\" is not " + (prefixes > 1 ? "unique" : "offered") +
                      "; the server offers [" + labels_of(field) + "]");
}

const std::string* LoginAnswers::entry(std::string_view form, std::string_view field) const {
    // The last -F for a field wins, as a later option overrides an earlier one.
    const std::string* found = nullptr;
    for (const auto& e : entries_)
        if (e.form == form && e.field == field) found = &e.value;
    return found;
}

Result<Secret> LoginAnswers::fill(const LoginField& field) {
    if (field.token && token_ && !token_exhausted_) {
        auto code = token_->next_code();
        if (code) return code;
        LOG_WARN << code.error().message << "; asking for " << field.label;
        token_exhausted_ = true;
    }
    if (const std::string* v = entry(field.form, field.name)) {
        LOG_DEBUG << "form field " << field_name(field) << " from --form-entry";
        return Secret::from_string(*v);
    }
    return prompter_.ask_field(field);
}

Result<const LoginField::Choice*> LoginAnswers::choose(const LoginField& field, std::string_view preset) {
    if (field.choices.empty()) return make_error("the form's list " + field_name(field) + " has no choices");
    if (!preset.empty()) return match_choice(field, preset);
    if (const std::string* v = entry(field.form, field.name)) {
        auto chosen = match_choice(field, *v);
        if (chosen) return chosen;
        LOG_WARN << "--form-entry " << field_name(field) << "=" << *v << ": " << chosen.error().message;
    }
    if (field.choices.size() == 1) return &field.choices.front();
    LoginField asked = field;
    if (asked.label.empty()) asked.label = field.name + ":";
    // Asked again after an answer that matches nothing, as openconnect does (bounded).
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto answer = prompter_.ask_select(asked);
        if (!answer)
            return make_error(answer.error().message + " (the form field " + field_name(field) + " offers [" +
                              labels_of(field) + "]: answer with --form-entry " + field_name(field) + "=CHOICE" +
                              (field.name == "group_list" ? " or --authgroup" : "") + ")");
        auto chosen = match_choice(field, *answer);
        if (chosen) return chosen;
        prompter_.show(chosen.error().message);
    }
    return make_error("no valid choice for " + field_name(field) + " after 5 answers");
}

}  // namespace espvpn::session
