#include "protocols/anyconnect/auth.h"

#include <algorithm>
#include <cctype>

#include "protocols/base/ascii.h"
#include "protocols/http/message.h"
#include "protocols/http/secret_buffer.h"
#include "protocols/xml/document.h"
#include "protocols/xml/escape.h"

namespace espvpn::anyconnect {

namespace {

std::optional<AcFormField::Kind> field_kind(std::string_view type) {
    if (http::iequals(type, "text")) return AcFormField::Kind::text;
    if (http::iequals(type, "password")) return AcFormField::Kind::password;
    if (http::iequals(type, "hidden")) return AcFormField::Kind::hidden;
    if (http::iequals(type, "sso")) return AcFormField::Kind::sso;
    return std::nullopt;  // submit, button, ...: nothing to send
}

// The <opaque> element as the server wrote it (Cisco wants it back byte for byte).
std::string opaque_element(std::string_view body) {
    auto begin = body.find("<opaque");
    if (begin == std::string_view::npos) return {};
    auto end = body.find("</opaque>", begin);
    if (end == std::string_view::npos) return {};
    return std::string(body.substr(begin, end + 9 - begin));
}

void append_header(std::string& out, const AcClientInfo& client, std::string_view type) {
    out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<config-auth client=\"vpn\" type=\"";
    out += type;
    out += "\" aggregate-auth-version=\"2\"><version who=\"vpn\">" + xml::escape(client.version) + "</version>";
    out += "<device-id>" + xml::escape(client.device_id) + "</device-id>";
    // Only the flows a configured browser can finish: a server seeing one may insist on it.
    // multiple-cert only with a second certificate, as openconnect: a server seeing it asks for one.
    if (client.sso_v2 || client.sso_external || client.multiple_cert) {
        out += "<capabilities>";
        if (client.sso_v2) out += "<auth-method>single-sign-on-v2</auth-method>";
        if (client.sso_external) out += "<auth-method>single-sign-on-external-browser</auth-method>";
        if (client.multiple_cert) out += "<auth-method>multiple-cert</auth-method>";
        out += "</capabilities>";
    }
}

bool valid_element_name(std::string_view name) {
    if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
    return true;
}

}  // namespace

const AcFormField* AcAuthReply::field(std::string_view name) const {
    for (const auto& f : fields)
        if (f.name == name) return &f;
    return nullptr;
}

Result<AcAuthReply> parse_auth_reply(std::string_view body) {
    auto doc = xml::Document::parse(body);
    if (!doc) return make_error("the server's auth reply: " + doc.error().message);
    if (auto st = doc->expect_root("config-auth"); !st) return make_error("the server's auth reply: " + st.error().message);
    xml::Node root = doc->root();
    AcAuthReply reply;
    std::string type = root.attribute("type").value_or("");
    if (type == "complete") reply.type = AcAuthReply::Type::complete;
    else if (type == "auth-request") reply.type = AcAuthReply::Type::auth_request;
    else return make_error("the server's auth reply has config-auth type \"" + type + "\", expected auth-request or complete");

    reply.opaque = opaque_element(body);
    if (xml::Node token = root.child("session-token")) {
        reply.session_token = token.text_secret();
        // It goes into Cookie headers and the printed COOKIE line: RFC 6265's cookie-octets only
        // (no control byte, space, quote, comma, semicolon or backslash). Never quoted back: a secret.
        for (std::uint8_t b : reply.session_token.reveal())
            if (b <= 0x20 || b >= 0x7f || b == '"' || b == ',' || b == ';' || b == '\\')
                return make_error("the server's <session-token> is not a usable cookie value (it holds a control "
                                  "byte, a space or one of \" , ; \\)");
    }
    reply.client_cert_requested = static_cast<bool>(root.child("client-cert-request"));
    if (xml::Node mca = root.child("multiple-client-cert-request")) {
        AcMcaRequest request;
        for (const xml::Node& h : mca.children("hash-algorithm")) request.hashes.push_back(ascii_lower(h.text()));
        request.cert_authenticated = static_cast<bool>(root.child("cert-authenticated"));
        request.signed_document = std::string(body);
        // Without the machine certificate accepted there is nothing to add a second one to.
        if (!request.cert_authenticated) reply.client_cert_requested = true;
        reply.mca = std::move(request);
    }
    reply.host_scan = parse_host_scan(root);
    xml::Node auth = root.child("auth");
    if (!auth && (reply.client_cert_requested || reply.mca || reply.host_scan) &&
        reply.type == AcAuthReply::Type::auth_request)
        return reply;
    // openconnect reads an <error> beside <auth> too (e.g. a refused certificate).
    const std::string outer_error = root.child_text_or_empty("error");
    if (!auth)
        return make_error("the server's " + type + " reply has no <auth> element" +
                          (outer_error.empty() ? std::string() : ": " + outer_error));
    reply.auth_id = auth.attribute("id").value_or("");
    reply.message = auth.child_text_or_empty("message");
    reply.banner = auth.child_text_or_empty("banner");
    reply.error = auth.child_text_or_empty("error");
    if (reply.error.empty()) reply.error = outer_error;
    if (reply.success() || reply.client_cert_requested || reply.mca || reply.host_scan) return reply;
    if (xml::Node login = auth.child("sso-v2-login")) {
        AcSsoRequest sso;
        sso.login = login.text();
        sso.login_final = auth.child_text_or_empty("sso-v2-login-final");
        sso.logout = auth.child_text_or_empty("sso-v2-logout");
        sso.token_cookie = auth.child_text_or_empty("sso-v2-token-cookie-name");
        sso.error_cookie = auth.child_text_or_empty("sso-v2-error-cookie-name");
        sso.browser_mode = auth.child_text_or_empty("sso-v2-browser-mode");
        if (sso.login.empty()) return make_error("the server's single sign-on request has an empty <sso-v2-login>");
        if (!sso.external() && (sso.login_final.empty() || sso.token_cookie.empty()))
            return make_error("the server's single sign-on request lacks <sso-v2-login-final> or "
                              "<sso-v2-token-cookie-name>");
        reply.sso = std::move(sso);
    }

    xml::Node form = auth.child("form");
    if (!form) {
        std::string why = !reply.error.empty() ? reply.error : reply.message;
        return make_error("the server's auth-request has no form" + (why.empty() ? std::string() : ": " + why));
    }
    // A form without an action posts to "/" (openconnect's default: Cisco's forms often omit it).
    reply.form_action = form.attribute("action").value_or("/");
    for (const xml::Node& n : form.children()) {
        AcFormField f;
        f.name = n.attribute("name").value_or("");
        f.label = n.attribute("label").value_or("");
        if (n.name() == "input") {
            auto kind = field_kind(n.attribute("type").value_or("text"));
            if (!kind) continue;
            f.kind = *kind;
            f.value = n.attribute("value").value_or("");
        } else if (n.name() == "select") {
            f.kind = AcFormField::Kind::select;
            for (const xml::Node& o : n.children("option")) {
                AcFormOption opt;
                opt.label = o.text();
                opt.value = o.attribute("value").value_or(opt.label);
                f.options.push_back(std::move(opt));
            }
            if (f.options.empty()) return make_error("the form's list \"" + f.name + "\" has no options");
        } else {
            continue;
        }
        if (!valid_element_name(f.name))
            return make_error("the form has a field with an unusable name \"" + f.name + "\"");
        reply.fields.push_back(std::move(f));
    }
    return reply;
}

bool refusal_names_certificate(std::string_view http_reason) {
    return ascii_lower(http_reason).find("certificate") != std::string::npos;
}

std::string client_certificate_error(std::string_view server, const std::optional<std::string>& presented_subject) {
    if (!presented_subject)
        return "the server " + std::string(server) +
               " wants a client certificate; give one with -c/--certificate (and -k/--sslkey if the key is apart)";
    std::string subject = presented_subject->empty() ? std::string() : " \"" + *presented_subject + "\"";
    return "the server " + std::string(server) + " refused the client certificate" + subject +
           " (not issued by a CA it trusts, expired, or not naming a user it knows)";
}

std::string build_init_request(const AcClientInfo& client, std::string_view group_select, bool client_cert_fail) {
    std::string out;
    append_header(out, client, "init");
    out += "<group-access>" + xml::escape(client.group_access) + "</group-access>";
    if (client_cert_fail) out += "<client-cert-fail/>";
    if (!group_select.empty()) out += "<group-select>" + xml::escape(group_select) + "</group-select>";
    out += "</config-auth>";
    return out;
}

std::string redact_session_token(std::string_view body) {
    static constexpr std::string_view open = "<session-token", close = "</session-token>";
    std::string out;
    std::size_t at = 0;
    while (true) {
        auto begin = body.find(open, at);
        if (begin == std::string_view::npos) break;
        auto content = body.find('>', begin);
        if (content == std::string_view::npos) break;
        ++content;
        out += body.substr(at, content - at);
        at = content;
        if (body[content - 2] == '/') continue;  // <session-token/>: nothing inside
        auto end = body.find(close, content);
        out += "<redacted>";
        if (end == std::string_view::npos) return out;  // unterminated: the rest may be the token
        at = end;
    }
    out += body.substr(at);
    return out;
}

std::string_view reply_element(std::string_view name) {
    if (name == "answer" || name == "whichpin" || name == "new_password") return "password";
    if (name == "verify_pin" || name == "verify_password") return {};
    return name;
}

Secret build_auth_reply(const AcClientInfo& client, const std::vector<AcFieldValue>& fields,
                        std::string_view group_select, std::string_view opaque, std::string_view host_scan_token) {
    std::string head;
    append_header(head, client, "auth-reply");
    head += opaque;
    head += "<auth>";
    http::SecretBuffer out;
    out.append(head);
    for (const auto& f : fields) {
        const std::string element(reply_element(f.name));
        if (element.empty()) continue;
        out.append("<" + element + ">");
        // Escaped piecewise so the value never sits in a plain std::string.
        for (std::uint8_t b : f.value.reveal()) {
            // A control byte is kept: dropping it would send another password.
            if (std::string_view e = xml::entity(static_cast<char>(b)); !e.empty()) out.append(e);
            else out.append(std::span<const std::uint8_t>(&b, 1));
        }
        out.append("</" + element + ">");
    }
    out.append("</auth>");
    if (!group_select.empty()) out.append("<group-select>" + xml::escape(group_select) + "</group-select>");
    if (!host_scan_token.empty()) out.append("<host-scan-token>" + xml::escape(host_scan_token) + "</host-scan-token>");
    out.append("</config-auth>");
    return out.take_secret();
}

Result<std::string> choose_mca_hash(const AcMcaRequest& request) {
    for (const char* h : {"sha512", "sha384", "sha256"})
        if (std::find(request.hashes.begin(), request.hashes.end(), h) != request.hashes.end()) return std::string(h);
    std::string offered;
    for (const auto& h : request.hashes) offered += (offered.empty() ? "" : ", ") + h;
    return make_error("the server's multiple-certificate request offers no hash espvpn signs with (sha256, sha384, "
                      "sha512); it offers " + (offered.empty() ? std::string("none") : offered));
}

std::string build_mca_reply(const AcClientInfo& client, std::string_view opaque, std::string_view pkcs7_base64,
                            std::string_view hash, std::string_view signature_base64) {
    std::string out;
    append_header(out, client, "auth-reply");
    out += "<session-token/><session-id/>";
    out += opaque;
    out += "<auth><client-cert-chain cert-store=\"1M\"><client-cert-sent-via-protocol/></client-cert-chain>";
    out += "<client-cert-chain cert-store=\"1U\"><client-cert cert-format=\"pkcs7\">" + xml::escape(pkcs7_base64) +
           "</client-cert>";
    out += "<client-cert-auth-signature hash-algorithm-chosen=\"" + xml::escape(hash) + "\">" +
           xml::escape(signature_base64) + "</client-cert-auth-signature></client-cert-chain></auth></config-auth>";
    return out;
}

std::string padding_for(std::size_t body_size) {
    std::size_t pad = (64 - body_size % 64) % 64;
    return std::string(pad == 0 ? 64 : pad, '0');
}

}  // namespace espvpn::anyconnect
