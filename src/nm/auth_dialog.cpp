#include "src/nm/auth_dialog.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "protocols/base/ascii.h"
#include "src/nm/libnm.h"
#include "src/nm/service_prompts.h"

namespace espvpn::nm {

unsigned secret_flags(const VpnSettings& settings, const std::string& key) {
    auto it = settings.data.find(key + "-flags");
    if (it == settings.data.end() || it->second.empty()) return 0;
    char* end = nullptr;
    const unsigned long v = std::strtoul(it->second.c_str(), &end, 10);
    if (*end != '\0' || v > 0xff) return 0;
    return static_cast<unsigned>(v);
}

std::vector<AskedSecret> secrets_to_ask(const VpnSettings& settings, bool reprompt) {
    std::vector<AskedSecret> asked;
    if (secret_flags(settings, "password") & NM_SETTING_SECRET_FLAG_NOT_REQUIRED) return asked;
    if (!reprompt && has_secret(settings, "cookie")) return asked;
    if (is_sso_profile(settings) && !has_secret(settings, "password")) return asked;  // the browser logs in
    asked.push_back({"password", "Password", reprompt || !has_secret(settings, "password"), {}});
    // A code is good once: always asked, even beside a stored password.
    if (wants_otp(settings)) asked.push_back({"otp", "One-time code", true, {}});
    return asked;
}

bool needs_login(const VpnSettings& settings, bool reprompt) {
    if (secret_flags(settings, "password") & NM_SETTING_SECRET_FLAG_NOT_REQUIRED) return false;
    return reprompt || !has_secret(settings, "cookie");
}

std::string external_ui_reply(const std::string& connection_name, const VpnSettings& settings,
                              const std::vector<AskedSecret>& asked, std::string_view message) {
    GKeyFile* kf = g_key_file_new();
    const char* ui = "VPN Plugin UI";
    std::string server;
    if (auto it = settings.data.find("gateway"); it != settings.data.end()) server = it->second;
    auto user = settings.data.find("user");
    if (user == settings.data.end()) user = settings.data.find("username");
    const bool otp = std::any_of(asked.begin(), asked.end(), [](const AskedSecret& a) { return a.key == "otp"; });
    std::string description = std::string(otp ? "Password and one-time code" : "Password") +
                              " needed for the VPN connection '" + connection_name + "'";
    if (!server.empty()) description += " to " + server;
    if (user != settings.data.end() && !user->second.empty()) description += " as " + user->second;
    if (!message.empty()) description = printable(message);
    g_key_file_set_integer(kf, ui, "Version", 2);
    g_key_file_set_string(kf, ui, "Description", description.c_str());
    g_key_file_set_string(kf, ui, "Title", ("Authenticate VPN " + connection_name).c_str());
    for (const auto& a : asked) {
        std::string value = a.should_ask ? std::string() : std::string(a.value.reveal_text());
        g_key_file_set_string(kf, a.key.c_str(), "Value", value.c_str());
        explicit_bzero(value.data(), value.size());
        g_key_file_set_string(kf, a.key.c_str(), "Label", a.label.c_str());
        g_key_file_set_boolean(kf, a.key.c_str(), "IsSecret", TRUE);
        g_key_file_set_boolean(kf, a.key.c_str(), "ShouldAsk", a.should_ask ? TRUE : FALSE);
    }
    gsize length = 0;
    gchar* text = g_key_file_to_data(kf, &length, nullptr);
    std::string out(text, length);
    explicit_bzero(text, length);
    g_free(text);
    g_key_file_free(kf);
    return out;
}

std::optional<ChallengeRound> challenge_round(const std::vector<std::string>& hints) {
    auto key = std::find_if(hints.begin(), hints.end(), [](const std::string& h) { return is_challenge_secret(h); });
    if (key == hints.end()) return std::nullopt;
    ChallengeRound round;
    round.field = {*key, "One-time code", true, {}};
    constexpr std::string_view kMessage = "x-vpn-message:";
    for (const auto& h : hints) {
        if (h.starts_with(kLabelHint) && h.size() > kLabelHint.size())
            round.field.label = printable(std::string_view(h).substr(kLabelHint.size()));
        else if (h.starts_with(kMessage))
            round.message = printable(std::string_view(h).substr(kMessage.size()));
    }
    return round;
}

std::vector<AskedSecret> handed_secrets(const std::map<std::string, Secret>& secrets) {
    std::vector<AskedSecret> out;
    for (const auto& [key, value] : secrets) {
        AskedSecret a;
        a.key = key;
        a.label = key;
        a.should_ask = false;
        a.value = Secret::from_string(value.reveal_text());
        out.push_back(std::move(a));
    }
    return out;
}

Result<std::map<std::string, Secret>> secrets_from_authenticate(std::string_view output) {
    // NAME='value' lines, shell-quoted (a ' inside a value is written '\''): g_shell_unquote
    // is the inverse.
    std::map<std::string, std::string> values;
    std::size_t pos = 0;
    while (pos < output.size()) {
        std::size_t end = output.find('\n', pos);
        if (end == std::string_view::npos) end = output.size();
        std::string_view line = output.substr(pos, end - pos);
        pos = end + 1;
        const std::size_t eq = line.find('=');
        if (eq == std::string_view::npos) continue;
        std::string quoted(line.substr(eq + 1));
        gchar* value = g_shell_unquote(quoted.c_str(), nullptr);
        explicit_bzero(quoted.data(), quoted.size());
        if (!value) {
            for (auto& [name, v] : values) explicit_bzero(v.data(), v.size());
            return make_error("espvpn --authenticate printed a line that is not NAME='value'");
        }
        values[std::string(line.substr(0, eq))] = value;
        explicit_bzero(value, std::strlen(value));
        g_free(value);
    }
    std::map<std::string, Secret> out;
    auto cookie = values.find("COOKIE");
    if (cookie == values.end() || cookie->second.empty()) {
        // GlobalProtect inside the corporate network with no internal gateway: not a login
        // failure, but nothing to connect; the reason is what NetworkManager's log shows.
        if (auto why = values.find("NO_TUNNEL"); why != values.end() && !why->second.empty())
            return make_error(printable(why->second));
        return make_error("espvpn --authenticate printed no COOKIE");
    }
    out["cookie"] = Secret::from_string(cookie->second);
    if (auto v = values.find("CONNECT_URL"); v != values.end() && !v->second.empty())
        out["gateway"] = Secret::from_string(v->second);
    if (auto v = values.find("FINGERPRINT"); v != values.end() && !v->second.empty())
        out["gwcert"] = Secret::from_string(v->second);
    if (auto v = values.find("RESOLVE"); v != values.end()) {
        // HOST:IP; useless when the host already is that address.
        const std::size_t colon = v->second.find(':');
        if (colon != std::string::npos && colon + 1 < v->second.size() &&
            v->second.substr(0, colon) != v->second.substr(colon + 1))
            out["resolve"] = Secret::from_string(v->second);
    }
    for (auto& [name, value] : values) explicit_bzero(value.data(), value.size());
    return out;
}

Result<Secret> classic_reply(const std::map<std::string, Secret>& secrets) {
    std::size_t size = 2;
    for (const auto& [key, value] : secrets) {
        for (char c : value.reveal_text())
            if (c == '\n') return make_error("secret '" + key + "' spans more than one line");
        size += key.size() + value.size() + 2;
    }
    Secret out(size);
    auto bytes = out.reveal_mutable();
    std::size_t at = 0;
    auto put = [&](std::string_view text) {
        for (char c : text) bytes[at++] = static_cast<std::uint8_t>(c);
    };
    for (const auto& [key, value] : secrets) {
        put(key);
        put("\n");
        put(value.reveal_text());
        put("\n");
    }
    put("\n\n");
    return out;
}

}  // namespace espvpn::nm
