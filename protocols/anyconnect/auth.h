// AnyConnect "aggregate auth" (docs/protocols/anyconnect.md §1): the config-auth XML documents a
// client posts (init, auth-reply) and the server's replies (auth-request forms,
// complete/success). Sans-IO: bytes in, values out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/anyconnect/csd.h"

namespace espvpn::anyconnect {

// ocserv classifies clients by User-Agent; an unknown one loses IPv6 (docs/protocols/anyconnect.md §1.4).
inline constexpr std::string_view kUserAgentPrefix = "Open AnyConnect VPN Agent ";
inline constexpr std::string_view kDefaultVersion = "v9.01-3";

// What every config-auth document the client sends carries.
struct AcClientInfo {
    std::string version{kDefaultVersion};  // <version who="vpn">
    std::string device_id = "linux-64";      // --os
    std::string group_access;                // the URL contacted, "https://host:port/path"
    // The single sign-on flows the client can finish, advertised in <capabilities>
    // (a server seeing one may insist on it, so only what a configured browser can do):
    bool sso_v2 = false;            // single-sign-on-v2: a browser espvpn watches (token cookie)
    bool sso_external = false;      // single-sign-on-external-browser: the loopback redirect
    bool multiple_cert = false;     // multiple-cert: a second (user) certificate is configured (--mca-certificate)
};

// <multiple-client-cert-request> (Cisco multiple-certificate authentication, as
// openconnect 9 speaks it): the machine certificate went in the TLS handshake; the
// user certificate's key signs the server's whole reply document.
struct AcMcaRequest {
    std::vector<std::string> hashes;  // <hash-algorithm> values offered, in order, lower-cased
    bool cert_authenticated = false;  // <cert-authenticated/>: the TLS (machine) certificate was accepted
    std::string signed_document;      // the reply's body, byte for byte: what the signature covers
};

// The strongest of the offered hashes espvpn signs with (sha512, then sha384, then
// sha256, as openconnect), or an error naming what was offered.
Result<std::string> choose_mca_hash(const AcMcaRequest& request);

// The loopback port an external-browser login is redirected to (Cisco's choice, as openconnect).
inline constexpr std::uint16_t kSsoExternalPort = 29786;

// An auth-request that wants single sign-on (<sso-v2-login> in <auth>).
struct AcSsoRequest {
    std::string login;         // sso-v2-login: open this in the browser
    std::string login_final;   // sso-v2-login-final: the browser reaching it has the token cookie
    std::string logout;        // sso-v2-logout
    std::string token_cookie;  // sso-v2-token-cookie-name
    std::string error_cookie;  // sso-v2-error-cookie-name ("" when absent)
    std::string browser_mode;  // sso-v2-browser-mode: "external" for the loopback flow, else ""
    bool external() const { return browser_mode == "external"; }
};

struct AcFormOption {
    std::string value;  // what is sent
    std::string label;  // what the user sees and --authgroup matches
};

struct AcFormField {
    enum class Kind { text, password, hidden, select, sso };  // sso: the token of a single sign-on
    Kind kind = Kind::text;
    std::string name;
    std::string label;
    std::string value;                  // hidden fields: echoed back
    std::vector<AcFormOption> options;  // select only
};

// A parsed <config-auth> reply.
struct AcAuthReply {
    enum class Type { auth_request, complete };
    Type type = Type::auth_request;
    std::string auth_id;        // "main", "success", ...
    std::string message;        // text to show
    std::string banner;
    std::string error;          // <error>
    std::string form_action;    // next POST target: "/" for a form without one, "" without a form
    std::vector<AcFormField> fields;
    std::string opaque;         // the whole <opaque> element, to echo verbatim ("" when absent)
    // <session-token> (Cisco): the session cookie itself, sent in the XML instead of (or besides)
    // Set-Cookie webvpn; openconnect stores it as the webvpn cookie. Empty when absent or empty.
    Secret session_token;
    // <client-cert-request> (or a multiple-client-cert-request without <cert-authenticated/>):
    // the server wants a client certificate in the TLS handshake before it goes on; such a
    // reply may have no form.
    bool client_cert_requested = false;
    // <multiple-client-cert-request>: the server wants the second certificate's signature.
    std::optional<AcMcaRequest> mca;
    // <host-scan>: the server wants the CSD program run first (csd.h); such a reply may have no form.
    std::optional<AcHostScan> host_scan;
    // <sso-v2-login> and its companions: the form's sso field is answered by a browser.
    std::optional<AcSsoRequest> sso;

    bool success() const { return type == Type::complete || auth_id == "success"; }
    const AcFormField* field(std::string_view name) const;
    // The group selection list (name "group_list"), if the form has one.
    const AcFormField* group_list() const { return field("group_list"); }
};

// Parses the server's config-auth document; errors name what was wrong
// ("not XML", "unexpected root", "auth-request without a form").
Result<AcAuthReply> parse_auth_reply(std::string_view body);

// True when an HTTP refusal's reason is about the client certificate: ocserv
// answers a missing or untrusted one with "401 No certificate", no XML.
bool refusal_names_certificate(std::string_view http_reason);

// The error for a login the server refused for want of a (good) client
// certificate. presented_subject: the subject of the certificate configured with
// -c, std::nullopt when none was.
std::string client_certificate_error(std::string_view server, const std::optional<std::string>& presented_subject);

// The first POST: <config-auth type="init">, with <group-select> once a group
// has been chosen. client_cert_fail: <client-cert-fail/>, the answer to a
// <client-cert-request> the client has no (accepted) certificate for.
std::string build_init_request(const AcClientInfo& client, std::string_view group_select = {},
                               bool client_cert_fail = false);

// The reply body with the text of every <session-token> element replaced by "<redacted>",
// for --dump-http-traffic (the token is the session cookie).
std::string redact_session_token(std::string_view body);

struct AcFieldValue {
    std::string name;
    Secret value;
};

// The element a form field is sent back as: a challenge's "answer", "whichpin" and
// "new_password" go as <password> (Cisco's convention, which openconnect follows),
// "verify_pin"/"verify_password" not at all (""); any other field under its own name.
std::string_view reply_element(std::string_view field_name);

// <config-auth type="auth-reply"> with one element per field (named by reply_element),
// the opaque element echoed, the chosen group and, once a CSD host scan ran, its token as
// <host-scan-token> (as openconnect). A Secret: it carries the password.
Secret build_auth_reply(const AcClientInfo& client, const std::vector<AcFieldValue>& fields,
                        std::string_view group_select = {}, std::string_view opaque = {},
                        std::string_view host_scan_token = {});

// The reply to a multiple-client-cert-request: the machine certificate "sent via
// protocol" (store 1M) and the user certificate (store 1U) as base64 PKCS#7 with the
// base64 signature of the request document and the hash chosen; the opaque echoed.
std::string build_mca_reply(const AcClientInfo& client, std::string_view opaque, std::string_view pkcs7_base64,
                            std::string_view hash, std::string_view signature_base64);

// X-Pad value that rounds a body of body_size bytes up to a multiple of 64, so
// the length of the password does not show (docs/protocols/anyconnect.md §1.1).
std::string padding_for(std::size_t body_size);

}  // namespace espvpn::anyconnect
