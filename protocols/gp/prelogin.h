// Prelogin (portal /global-protect/prelogin.esp, gateway /ssl-vpn/prelogin.esp):
// tells the client which form to show and whether SAML is required.
#pragma once

#include <optional>
#include <string>

#include "protocols/gp/auth_reply.h"

namespace espvpn::gp {

struct GpSamlRequest {
    enum class Method { Redirect, Post };
    Method method = Method::Redirect;
    // REDIRECT: the IdP URL. POST: an HTML auto-submit form.
    std::string decoded;
    bool default_browser = false;  // saml-default-browser=yes
    std::string request_timeout;   // informational, as sent
};

struct GpPrelogin {
    std::string status;  // "Success"
    std::string message;
    std::string authentication_message;
    std::string username_label = "Username";
    std::string password_label = "Password";
    std::string region;
    std::string ccusername;
    std::string panos_version;
    std::optional<GpSamlRequest> saml;  // only when both method and request are present

    // OC's hint: a password label other than "Password" means an OTP field.
    bool password_is_otp() const { return password_label != "Password"; }
};

Result<GpPrelogin> parse_prelogin(const xml::Document& doc);
Result<GpAuthOutcome<GpPrelogin>> parse_prelogin_reply(std::string_view body);

}  // namespace espvpn::gp
