#include "protocols/anyconnect/session_cookie.h"

#include <array>

#include "protocols/http/secret_buffer.h"

namespace espvpn::anyconnect {

namespace {

std::string_view trim_spaces(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
    return s;
}

// Cookie names openconnect puts into its composite string.
constexpr std::array<std::string_view, 4> kKnownNames{"webvpn", "openconnect_strapkey", "webvpncontext", "webvpnc"};

bool known_name(std::string_view name) {
    for (auto k : kKnownNames)
        if (k == name) return true;
    return false;
}

}  // namespace

Result<Secret> webvpn_from_cookie_text(std::string_view text) {
    text = trim_spaces(text);
    if (text.rfind("COOKIE=", 0) == 0) text.remove_prefix(7);
    if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') text = text.substr(1, text.size() - 2);
    bool composite = false;
    std::string_view bare;
    while (!text.empty()) {
        auto semi = text.find(';');
        std::string_view part = trim_spaces(text.substr(0, semi));
        text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
        if (part.empty()) continue;
        auto eq = part.find('=');
        if (eq != std::string_view::npos && known_name(part.substr(0, eq))) {
            composite = true;
            if (part.substr(0, eq) == "webvpn") {
                auto value = part.substr(eq + 1);
                if (value.empty()) return make_error("the cookie's webvpn value is empty");
                return Secret::from_string(value);
            }
        } else if (bare.empty()) {
            bare = part;
        }
    }
    if (composite && bare.empty()) return make_error("the cookie string has no webvpn=... part");
    if (bare.empty()) return make_error("the cookie is empty");
    return Secret::from_string(bare);
}

Secret cookie_text(const Secret& webvpn) {
    http::SecretBuffer out;
    out.append("webvpn=");
    out.append(webvpn);
    return out.take_secret();
}

}  // namespace espvpn::anyconnect
