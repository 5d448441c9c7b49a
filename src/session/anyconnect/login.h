// The AnyConnect login (docs/protocols/anyconnect.md §1): config-auth init, then auth-request
// forms answered round by round (username, password, more factors, the auth
// group), until "complete" with the webvpn session cookie. Every request goes
// over one HttpsClient, so the server sees one kept-alive TLS connection, which
// the tunnel then takes over for its CONNECT (HttpsClient::release_connection).
#pragma once

#include <optional>
#include <string>

#include "crypto/ecies_p256.h"
#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/anyconnect/auth.h"
#include "protocols/http/url.h"
#include "src/io/https_client.h"
#include "src/session/login_answers.h"
#include "src/session/login_prompter.h"
#include "src/session/anyconnect/mca_identity.h"
#include "src/session/sso_browser.h"

namespace espvpn::session {

// --mca-certificate, --mca-key, --mca-key-password.
struct McaFiles {
    std::string certificate;
    std::string key;  // "": in the certificate file
    Secret password;
};

struct AcLoginSettings {
    http::Url server;            // its target is the first POST's path ("/" usually)
    std::string user;            // -u: fills the first user-name field
    std::string authgroup;       // --authgroup: a group_list label (or value)
    std::string user_agent;
    anyconnect::AcClientInfo client;  // version, device id (group_access is filled in)
    // The subject of the client certificate offered in the TLS handshake (-c),
    // std::nullopt when none is configured: the error when the server wants one says which.
    std::optional<std::string> client_certificate;
    bool dump_traffic = false;   // --dump-http-traffic, secrets redacted
    std::string csd_wrapper;     // --csd-wrapper: run when the server asks for a CSD host scan
    std::string csd_user;        // --csd-user: run it as this user
    int max_rounds = 10;         // forms answered before giving up
    // -F FORM:FIELD=VALUE: FORM is the form's <auth id> ("main", "challenge", ...).
    std::vector<FormEntry> form_entries;
    // --token-mode: answers a "secondary_password" field, or a password field of a
    // form whose id is "challenge" (openconnect's rule).
    std::shared_ptr<SoftToken> token;
    // The browser a single sign-on (sso-v2-login) is handed to; nullptr: none configured,
    // so no SSO capability is advertised and a server demanding it is a clear error.
    std::shared_ptr<SsoBrowser> sso_browser;
    // --mca-certificate/--mca-key/--mca-key-password: the second (user) certificate of
    // multiple-certificate authentication; with it, and only with it, the client advertises
    // multiple-cert. Loaded when the server asks for it, as openconnect does.
    std::optional<McaFiles> mca;
};

struct AcAuthenticated {
    http::Url server;            // where the tunnel goes (target "/")
    Secret webvpn;               // the session cookie
    std::string banner;
};

class AcLogin {
public:
    AcLogin(io::HttpsClient& https, AcLoginSettings settings, LoginPrompter& prompter)
        : https_(https), s_(std::move(settings)), prompter_(prompter), answers_(prompter, s_.form_entries, s_.token) {}

    // A refused login is an error like any other (openconnect exits 1 for it).
    Result<AcAuthenticated> run();

private:
    // A request to the server with the headers every AnyConnect login request carries.
    http::Request request(const char* method, const std::string& target) const;
    Result<anyconnect::AcAuthReply> post(const std::string& target, Secret body, const std::string& logged_body);
    // The init document again after a <client-cert-request> (openconnect's order): on a new
    // connection first when a certificate is configured (some ASAs ask for it in the TLS
    // handshake only there), else, or when asked again, with <client-cert-fail/>.
    Result<anyconnect::AcAuthReply> answer_client_cert_request(const std::string& target);
    // What every reply may carry beyond its form: <opaque>, <session-token>.
    void keep_session_state(const anyconnect::AcAuthReply& reply);
    // The CSD wrapper (csd.h), the wait page until the scan is done, then the init to `target`
    // again (openconnect's order): its reply.
    Result<anyconnect::AcAuthReply> run_host_scan(const anyconnect::AcHostScan& scan, const std::string& target);
    static constexpr int kCsdWaits = 30;  // wait page fetches, a second apart
    Result<std::vector<anyconnect::AcFieldValue>> answer(const anyconnect::AcAuthReply& form, std::string* logged);
    // The signed answer to a multiple-client-cert-request: the next reply.
    Result<anyconnect::AcAuthReply> answer_mca(const anyconnect::AcAuthReply& request, const std::string& target);
    // The single sign-on of `form` in the configured browser: its token, for the form's sso field.
    Result<Secret> single_sign_on(const anyconnect::AcSsoRequest& sso);

    io::HttpsClient& https_;
    AcLoginSettings s_;
    LoginPrompter& prompter_;
    LoginAnswers answers_;
    bool user_used_ = false;
    bool password_given_ = false;  // a password field answered: a later one may be the OTP
    bool retry_form_ = false;      // the form being answered follows a failed attempt
    bool fresh_connection_tried_ = false;  // a <client-cert-request> answered on a new connection
    bool cert_fail_sent_ = false;  // the last POST said <client-cert-fail/>
    std::string group_;          // chosen group_list value
    // The last <opaque> the server sent: echoed in every later auth-reply, as openconnect does,
    // also when the form that follows carries none.
    std::string opaque_;
    Secret session_token_;       // the last non-empty <session-token>: the session cookie
    std::string host_scan_token_;  // after a CSD host scan: its token, in every later auth-reply
    Secret sso_token_;           // the browser's token, for the form being answered
    // With the external-browser flow advertised: the key the server encrypts its token to
    // (STRAP), sent on every request of the login.
    std::optional<crypto::EciesP256Key> strap_;
};

}  // namespace espvpn::session
