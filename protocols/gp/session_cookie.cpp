#include "protocols/gp/session_cookie.h"

#include "protocols/http/form.h"

namespace espvpn::gp {

namespace {

// jnlp argument indexes (docs/protocols/globalprotect.md §5).
enum JnlpArg : std::size_t {
    kAuthcookie = 1,
    kPortal = 3,
    kUser = 4,
    kAuthSource = 5,
    kConfiguration = 6,
    kDomain = 7,
    kConnectionType = 12,
    kPasswordExpiration = 13,
    kClientVer = 14,
    kPreferredIp = 15,
    kPortalUserauthcookie = 16,
    kPreferredIpv6 = 18,
};

// "", "(null)" and "-1" all mean "absent" in a jnlp argument.
bool absent(std::string_view v) { return v.empty() || v == "(null)" || v == "-1"; }

}  // namespace

void GpSessionCookie::append_to(http::FormBody& f, bool with_preferred) const {
    f.add("authcookie", authcookie).add("portal", portal).add("user", user).add("domain", domain);
    if (with_preferred && !preferred_ip.empty()) f.add("preferred-ip", preferred_ip);
    if (with_preferred && !preferred_ipv6.empty()) f.add("preferred-ipv6", preferred_ipv6);
    f.add("computer", computer);
}

Secret GpSessionCookie::encode() const {
    http::FormBody f;
    append_to(f);
    return f.finish();
}

std::string GpSessionCookie::hip_md5_input() const {
    return "portal=" + http::percent_encode(portal) + "&user=" + http::percent_encode(user) +
           "&domain=" + http::percent_encode(domain) + "&computer=" + http::percent_encode(computer);
}

Result<GpSessionCookie> GpSessionCookie::decode(std::string_view text) {
    std::string copy(xml::trim(text));
    auto pairs = http::parse_form(copy);
    secure_zero(copy.data(), copy.size());
    if (!pairs) return make_error("session cookie: " + pairs.error().message);
    GpSessionCookie c;
    bool have_user = false;
    for (auto& [k, v] : *pairs) {
        if (k == "authcookie") c.authcookie = Secret::from_string(v);
        else if (k == "portal") c.portal = v;
        else if (k == "user") { c.user = v; have_user = true; }
        else if (k == "domain") c.domain = v;
        else if (k == "preferred-ip") c.preferred_ip = v;
        else if (k == "preferred-ipv6") c.preferred_ipv6 = v;
        else if (k == "computer") c.computer = v;
        else {
            for (auto& [k2, v2] : *pairs) secure_zero(v2.data(), v2.size());
            return make_error("session cookie: unknown field \"" + k + "\"");
        }
    }
    for (auto& [k, v] : *pairs) secure_zero(v.data(), v.size());
    if (c.authcookie.empty()) return make_error("session cookie: missing authcookie");
    if (!have_user || c.user.empty()) return make_error("session cookie: missing user");
    return c;
}

GpSessionCookie GpSessionCookie::clone() const {
    return GpSessionCookie{authcookie.clone(), portal, user, domain, preferred_ip, preferred_ipv6,
                           computer};
}

Result<GpLoginResult> parse_gateway_login(const xml::Document& doc, std::string_view computer) {
    if (auto st = doc.expect_root("jnlp"); !st) return st.error();
    auto desc = doc.require("application-desc");
    if (!desc) return desc.error();
    std::vector<xml::Node> args = desc->children("argument");
    if (args.size() <= kPreferredIp)
        return make_error("login reply: only " + std::to_string(args.size()) +
                          " jnlp arguments, expected at least " + std::to_string(kPreferredIp + 1));
    auto arg = [&](std::size_t i) -> std::string {
        if (i >= args.size()) return {};
        std::string v = args[i].text();
        return absent(v) ? std::string{} : v;
    };

    GpLoginResult r;
    r.cookie.authcookie = args[kAuthcookie].text_secret();
    if (absent(r.cookie.authcookie.reveal_text()))
        return make_error("login reply: jnlp argument 1 (authcookie) is empty");
    r.cookie.user = arg(kUser);
    if (r.cookie.user.empty()) return make_error("login reply: jnlp argument 4 (user) is empty");
    if (std::string ct = arg(kConnectionType); ct != "tunnel")
        return make_error("login reply: connection-type is \"" + ct + "\", expected \"tunnel\"");
    if (std::string ver = arg(kClientVer); ver != "4100")
        return make_error("login reply: clientVer is \"" + ver + "\", expected \"4100\"");
    r.cookie.portal = arg(kPortal);
    auto domain = http::percent_decode(arg(kDomain));  // often "%28empty_domain%29"
    if (!domain) return make_error("login reply: domain: " + domain.error().message);
    r.cookie.domain = std::move(*domain);
    r.cookie.preferred_ip = arg(kPreferredIp);
    r.cookie.preferred_ipv6 = arg(kPreferredIpv6);
    r.cookie.computer = std::string(computer);
    r.authentication_source = arg(kAuthSource);
    r.configuration = arg(kConfiguration);
    r.password_expiration_days = arg(kPasswordExpiration);
    r.portal_userauthcookie_echo = arg(kPortalUserauthcookie);
    return r;
}

Result<GpAuthOutcome<GpLoginResult>> parse_gateway_login_reply(std::string_view body,
                                                               std::string_view computer) {
    return parse_outcome<GpLoginResult>(
        body, [&](const xml::Document& d) { return parse_gateway_login(d, computer); });
}

}  // namespace espvpn::gp
