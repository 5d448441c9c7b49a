#include "protocols/gp/prelogin.h"

#include "protocols/gp/base64.h"

namespace espvpn::gp {

Result<GpPrelogin> parse_prelogin(const xml::Document& doc) {
    if (auto st = doc.expect_root("prelogin-response"); !st) return st.error();
    xml::Node r = doc.root();
    GpPrelogin p;
    p.status = r.child_text_or_empty("status");
    if (p.status.empty()) return make_error("missing element <prelogin-response/status>");
    p.message = r.child_text_or_empty("msg");
    p.authentication_message = r.child_text_or_empty("authentication-message");
    if (auto v = r.child_text("username-label"); v && !v->empty()) p.username_label = *v;
    if (auto v = r.child_text("password-label"); v && !v->empty()) p.password_label = *v;
    p.region = r.child_text_or_empty("region");
    p.ccusername = r.child_text_or_empty("ccusername");
    p.panos_version = r.child_text_or_empty("panos-version");

    auto method = r.child_text("saml-auth-method");
    auto request = r.child_text("saml-request");
    if (method && request && !method->empty() && !request->empty()) {
        GpSamlRequest saml;
        if (*method == "REDIRECT")
            saml.method = GpSamlRequest::Method::Redirect;
        else if (*method == "POST")
            saml.method = GpSamlRequest::Method::Post;
        else
            return make_error("prelogin: unknown saml-auth-method \"" + *method + "\"");
        auto decoded = base64_decode(*request);
        if (!decoded) return make_error("prelogin: saml-request: " + decoded.error().message);
        saml.decoded = std::move(*decoded);
        saml.default_browser = r.child_text_or_empty("saml-default-browser") == "yes";
        saml.request_timeout = r.child_text_or_empty("saml-request-timeout");
        p.saml = std::move(saml);
    }
    return p;
}

Result<GpAuthOutcome<GpPrelogin>> parse_prelogin_reply(std::string_view body) {
    return parse_outcome<GpPrelogin>(body, parse_prelogin);
}

}  // namespace espvpn::gp
