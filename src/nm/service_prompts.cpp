#include "src/nm/service_prompts.h"

#include "protocols/base/ascii.h"
#include "src/nm/auth_dialog.h"
#include "src/nm/libnm.h"

namespace espvpn::nm {

std::string challenge_secret(int round) {
    return round <= 1 ? std::string(kChallengeSecret) : std::string(kChallengeSecret) + std::to_string(round);
}

bool is_challenge_secret(std::string_view hint) {
    if (!hint.starts_with(kChallengeSecret)) return false;
    const std::string_view n = hint.substr(kChallengeSecret.size());
    return n.empty() || (n.size() <= 4 && n.front() != '0' &&
                         n.find_first_not_of("0123456789") == std::string_view::npos);
}

ServicePrompts::ServicePrompts(const VpnSettings& settings) {
    if (auto it = settings.secrets.find("password"); it != settings.secrets.end() && !it->second.empty())
        password_ = it->second.clone();
    if (auto it = settings.secrets.find("otp"); wants_otp(settings) && it != settings.secrets.end() &&
                                                 !it->second.empty())
        otp_ = it->second.clone();
    for (int i = 0; i < kMaxRounds; ++i) round_flags_[i] = secret_flags(settings, challenge_secret(i + 1));
}

namespace {

PromptStep answer(Secret value) {
    PromptStep s;
    s.kind = PromptStep::Kind::answer;
    s.value = std::move(value);
    return s;
}

PromptStep cancel() {
    PromptStep s;
    s.kind = PromptStep::Kind::cancel;
    return s;
}

}  // namespace

PromptStep ServicePrompts::on_record(const prompt::Record& r) {
    using prompt::RecordType;
    switch (r.type) {
    case RecordType::message:
        message_ = r.text;
        return {};
    case RecordType::error:
        message_ = r.text;
        error_ = true;
        return {};
    case RecordType::banner:
        return answer(Secret());  // accepted, as espvpn does with no terminal
    case RecordType::ask:
        break;
    }
    if (r.kind == prompt::FieldKind::select)  // the server's default, as the login picks it alone
        return answer(Secret::from_string(r.choices.empty() ? std::string() : r.choices.front()));
    // The server refused what was given (an error, or the password's field asked again):
    // the password retry takes over.
    // (ocserv's OTP form reuses the password's field name: only after a code it means "again".)
    if (error_ || (code_given_ && password_field_ == r.form + '\t' + r.name)) {
        refused_ = true;
        return cancel();
    }
    const bool pin = r.form == prompt::kTokenPinForm;  // a token's PIN is never the password
    if (!pin && r.kind == prompt::FieldKind::password && password_) {
        Secret v = std::move(*password_);
        password_.reset();
        password_field_ = r.form + '\t' + r.name;
        return answer(std::move(v));
    }
    if (!pin && !password_ && otp_) {
        Secret v = std::move(*otp_);
        otp_.reset();
        code_given_ = true;
        return answer(std::move(v));
    }
    const std::string label = printable(r.label.empty() ? std::string("One-time code") : r.label);
    if (rounds_ >= kMaxRounds || !(round_flags_[rounds_] & NM_SETTING_SECRET_FLAG_NOT_SAVED)) {
        PromptStep c = cancel();
        c.message = rounds_ >= kMaxRounds
                        ? "the server asks '" + label + "' after " + std::to_string(kMaxRounds) + " rounds: giving up"
                        : "the server asks '" + label + "', which the profile does not answer, and vpn.data has no " +
                              challenge_secret(rounds_ + 1) + "-flags=2 to ask it (not saved) through NetworkManager";
        return c;
    }
    PromptStep s;
    s.kind = PromptStep::Kind::ask_user;
    s.message = printable(message_.empty() ? r.label : message_);
    s.hints = {challenge_secret(++rounds_), std::string(kLabelHint) + label};
    message_.clear();
    waiting_ = true;
    return s;
}

bool ServicePrompts::has_answer(const VpnSettings& settings) const {
    return waiting_ && has_secret(settings, challenge_secret(rounds_));
}

PromptStep ServicePrompts::answer_from(const VpnSettings& settings) {
    waiting_ = false;
    auto it = settings.secrets.find(challenge_secret(rounds_));
    if (it == settings.secrets.end() || it->second.empty()) return cancel();
    code_given_ = true;
    return answer(it->second.clone());
}

}  // namespace espvpn::nm
