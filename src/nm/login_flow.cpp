#include "src/nm/login_flow.h"

#include "src/nm/auth_dialog.h"
#include "src/nm/libnm.h"

namespace espvpn::nm {

LoginFlow::LoginFlow(const VpnSettings& settings, bool reprompt) {
    password_flags_ = secret_flags(settings, "password");
    auto it = settings.secrets.find("password");
    if (!reprompt && it != settings.secrets.end() && !it->second.empty()) stored_ = &it->second;
}

void LoginFlow::start_run() {
    ++runs_;
    password_seen_ = false;
    typed_password_ = Secret();
}

namespace {

// A token's PIN is the user's to type: never the profile's password, never kept as it.
bool is_token_pin(const prompt::Record& record) { return record.form == prompt::kTokenPinForm; }

}  // namespace

const Secret* LoginFlow::automatic_answer(const prompt::Record& record) {
    if (record.type != prompt::RecordType::ask || record.kind != prompt::FieldKind::password) return nullptr;
    if (is_token_pin(record)) return nullptr;
    if (password_seen_ || runs_ > 1 || !stored_) return nullptr;
    password_seen_ = true;
    return stored_;
}

void LoginFlow::answered(const prompt::Record& record, const Secret& value) {
    if (record.type != prompt::RecordType::ask || record.kind != prompt::FieldKind::password || password_seen_ ||
        is_token_pin(record))
        return;
    password_seen_ = true;
    typed_password_ = value.clone();
}

Result<std::map<std::string, Secret>> LoginFlow::secrets(std::string_view output) const {
    auto out = secrets_from_authenticate(output);
    if (!out) return out.error();
    const unsigned not_kept = NM_SETTING_SECRET_FLAG_NOT_SAVED | NM_SETTING_SECRET_FLAG_NOT_REQUIRED;
    if (!typed_password_.empty() && !(password_flags_ & not_kept)) (*out)["password"] = typed_password_.clone();
    return out;
}

std::string failure_text(std::string_view text) {
    std::string last, last_error;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.empty()) continue;
        last = std::string(line);
        if (line.starts_with("error: ")) last_error = std::string(line.substr(7));
    }
    return last_error.empty() ? last : last_error;
}

}  // namespace espvpn::nm
