#include "protocols/gp/saml.h"

#include <algorithm>
#include <optional>

#include "protocols/base/ascii.h"
#include "protocols/gp/base64.h"
#include "protocols/http/form.h"
#include "protocols/xml/document.h"

namespace espvpn::gp {

namespace {

constexpr std::string_view kCookieFields[] = {"prelogin-cookie", "portal-userauthcookie"};

std::optional<std::string> header(const GpHeaderList& headers, std::string_view name) {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return std::string(xml::trim(v));
    return std::nullopt;
}

// Value of <name>…</name> anywhere in the text, comments included: the body
// is HTML, not XML, so a plain search is the robust reading.
std::optional<std::string> tag(std::string_view body, std::string_view name) {
    const std::string open = "<" + std::string(name) + ">", close = "</" + std::string(name) + ">";
    std::size_t a = body.find(open);
    if (a == std::string_view::npos) return std::nullopt;
    a += open.size();
    std::size_t b = body.find(close, a);
    if (b == std::string_view::npos) return std::nullopt;
    return std::string(xml::trim(body.substr(a, b - a)));
}

template <class Lookup>
Result<GpSamlResult> from_fields(Lookup&& get, std::string_view where) {
    auto status = get("saml-auth-status");
    if (!status) return make_error("SAML result: no saml-auth-status in " + std::string(where));
    if (*status != "1")
        return make_error("SAML authentication failed (saml-auth-status " + *status + ")");
    GpSamlResult r;
    r.username = get("saml-username").value_or("");
    if (r.username.empty()) return make_error("SAML result: no saml-username in " + std::string(where));
    for (std::string_view f : kCookieFields) {
        auto v = get(f);
        if (!v || v->empty()) continue;
        if (v->size() <= 5)
            return make_error("SAML result: " + std::string(f) + " is too short to be a cookie");
        r.field = std::string(f);
        r.value = Secret::from_string(*v);
        return r;
    }
    return make_error("SAML result: neither prelogin-cookie nor portal-userauthcookie in " +
                      std::string(where));
}

}  // namespace

Result<GpSamlResult> parse_saml_acs_result(const GpHeaderList& headers, std::string_view body) {
    // A field missing from the headers is looked for in the body: some servers send the
    // status as a header and the cookie only in the page.
    if (header(headers, "saml-auth-status"))
        return from_fields(
            [&](std::string_view n) {
                auto h = header(headers, n);
                return h && !h->empty() ? h : tag(body, n);
            },
            "headers");
    return from_fields([&](std::string_view n) { return tag(body, n); }, "the reply");
}

Result<GpSamlResult> parse_globalprotect_callback(std::string_view url) {
    constexpr std::string_view scheme = "globalprotectcallback:";
    if (url.substr(0, scheme.size()) != scheme)
        return make_error("not a globalprotectcallback: URL");
    std::string_view data = url.substr(scheme.size());
    while (!data.empty() && data.front() == '/') data.remove_prefix(1);

    // The form is URL-encoded once, either as a form or as a whole.
    std::vector<std::pair<std::string, std::string>> fields;
    if (data.substr(0, 8) == "cas-as=1") {
        auto form = http::parse_form(data);
        if (!form) return make_error("CAS callback: " + form.error().message);
        fields = std::move(*form);
    } else if (auto decoded = http::percent_decode(data); decoded && decoded->find("cas-as=1") == 0) {
        std::string_view rest = *decoded;
        while (!rest.empty()) {
            std::string_view item = rest.substr(0, rest.find('&'));
            rest.remove_prefix(std::min(rest.size(), item.size() + 1));
            std::size_t eq = item.find('=');
            fields.emplace_back(item.substr(0, eq),
                                eq == std::string_view::npos ? "" : item.substr(eq + 1));
        }
    }
    if (!fields.empty()) {
        GpSamlResult r;
        r.field = "token";
        for (auto& [k, v] : fields) {
            if (k == "un") r.username = v;
            if (k == "token") r.value = Secret::from_string(v);
            secure_zero(v.data(), v.size());
        }
        if (r.username.empty()) return make_error("CAS callback without un (user name)");
        if (r.value.empty()) return make_error("CAS callback without token");
        return r;
    }
    auto body = base64_decode(data);
    if (!body) return make_error("globalprotectcallback: data is neither CAS nor base64: " +
                                 body.error().message);
    return parse_saml_acs_result({}, *body);
}

}  // namespace espvpn::gp
