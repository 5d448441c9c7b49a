// The GlobalProtect login (docs/protocols/globalprotect.md §2-§6): portal prelogin → portal
// getconfig → gateway choice → gateway login, or straight to a gateway. Ends
// with the session cookie every later gateway request carries. Every request
// goes through one HttpsClient, so each host sees one kept-alive connection.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "protocols/base/result.h"
#include "protocols/gp/portal_config.h"
#include "protocols/gp/prelogin.h"
#include "protocols/gp/requests.h"
#include "protocols/gp/session_cookie.h"
#include "protocols/http/url.h"
#include "src/session/gp/gateway_latency.h"
#include "src/session/gp/internal_detection.h"
#include "src/session/gp/portal_cookie_cache.h"
#include "src/session/gp/request_sender.h"
#include "src/session/login_answers.h"
#include "src/session/login_prompter.h"
#include "src/session/sso_browser.h"

namespace espvpn::session {

enum class GpEntryPoint {
    automatic,  // portal first; "portal does not exist" → the same host as a gateway
    portal,
    gateway,
};

// The server URL and openconnect's --usergroup spelling: "portal", "gateway",
// optionally with ":prelogin-cookie" / ":portal-userauthcookie" — then the
// "password" read is that SAML cookie (how gp-saml-gui style helpers plug in).
// The same may be given as the URL path: https://vpn.example/gateway:prelogin-cookie.
struct GpLoginTarget {
    http::Url server;  // target reset to "/"
    GpEntryPoint entry = GpEntryPoint::automatic;
    std::string saml_field;  // "" or the form field that carries the SAML cookie
};
Result<GpLoginTarget> parse_gp_login_target(std::string_view url, std::string_view usergroup);

struct GpLoginSettings {
    GpLoginTarget target;
    std::string user;             // -u; empty: asked (or from the client certificate)
    gp::GpClientInfo client;      // computer, OS, app version
    std::string authgroup;        // gateway by name or address
    bool gateway_by_latency = false;
    std::chrono::milliseconds latency_budget{3000};
    // TLS rules for the latency probe, with connect/I/O timeouts of about the
    // budget; null: the login's own (slow probes then linger until its timeouts).
    std::shared_ptr<const io::TlsCredentials> probe_credentials;
    bool client_certificate = false;  // -c given: try a certificate-only login first
    int max_challenge_rounds = 8;
    // -F FORM:FIELD=VALUE with openconnect's GP form names: _login:user, _login:passwd,
    // _challenge:passwd, _portal:gateway (the gateway, when --authgroup is not given).
    std::vector<FormEntry> form_entries;
    // --token-mode: answers challenges (and a login form whose password label is not
    // "Password"), as openconnect's GP token heuristic does.
    std::shared_ptr<SoftToken> token;
    // Single sign-on (docs/SSO.md): when a prelogin asks for SAML and no saml_field
    // was given, the login opens the request in this browser and takes the
    // saml-username and cookie from its result (a globalprotectcallback: URL or the
    // ACS response). Null: the URL is printed and the cookie asked for (scripts).
    // The same hook serves the external browser (src/sso/external_browser.h) and
    // the driven one (src/sso/devtools_browser.h).
    std::shared_ptr<SsoBrowser> sso;
    // A portal cookie saved by an earlier run (portal_cookie_cache.h): the portal's getconfig is
    // tried with it first (its user, no password, no SSO) unless -u names another user. Refused
    // by the portal or the gateway: saved_cookie_refused(), and the normal login runs.
    std::optional<SavedPortalCookie> saved_cookie;
    // Internal host detection (internal_detection.h) when the portal config asks for it;
    // false (--no-internal-detection): the host counts as outside, external gateways only.
    bool internal_detection = true;
    std::chrono::milliseconds internal_detection_budget{3000};
    ReverseLookup reverse_lookup = resolver_reverse_lookup;
};

// A logged-in gateway session: what --authenticate prints and a connect uses.
struct GpAuthenticated {
    http::Url gateway;            // target "/"
    gp::GpSessionCookie cookie;
    std::string app_version;      // portal <version>, sent back as app-version
    std::optional<unsigned> hip_report_interval;
    std::optional<unsigned> captive_portal_exception_timeout;  // the portal config's (seconds)
    // The portal's authentication-override cookie of this login (empty: none), for the user
    // `portal_user`, valid for `portal_cookie_lifetime` when the portal says so; fresh when
    // the portal handed it out now (false: the saved one was used and not renewed).
    std::string portal_user;
    Secret portal_userauthcookie;
    Secret portal_prelogonuserauthcookie;
    std::optional<std::chrono::seconds> portal_cookie_lifetime;
    bool portal_cookie_fresh = false;
};

class GpLogin {
public:
    GpLogin(GpRequestSender& sender, GpLoginSettings settings, LoginPrompter& prompter)
        : http_(sender),
          settings_(std::move(settings)),
          prompter_(prompter),
          answers_(prompter, settings_.form_entries, settings_.token) {}

    Result<GpAuthenticated> run();

    // After a failed run(): true when the server refused the credentials
    // (openconnect exits 2 for a rejected cookie; we do the same for this).
    bool credentials_rejected() const { return rejected_; }
    // The saved portal cookie was tried and the portal or the gateway refused it.
    bool saved_cookie_refused() const { return saved_refused_; }
    // After a failed run(): this host is inside the corporate network and the portal lists
    // no internal gateway, so there is nothing to connect to (not an error for the user).
    bool no_tunnel_needed() const { return no_tunnel_needed_; }

private:
    struct Credentials;
    Result<GpAuthenticated> via_portal(bool* portal_missing);
    // The portal's getconfig with the saved cookie; nullopt (not an error) when it was refused.
    Result<std::optional<gp::GpPortalConfig>> portal_with_saved_cookie(const http::Url& server, Credentials& creds);
    Result<GpAuthenticated> via_gateway(const http::Url& gateway, Credentials* replay,
                                        const gp::GpPortalConfig* portal);
    // `wrong_interface`: set when the server says this portal/gateway does not exist.
    Result<gp::GpPrelogin> prelogin(gp::GpInterface iface, const http::Url& server, bool* wrong_interface);
    Result<Credentials> ask_credentials(const gp::GpPrelogin& info, const http::Url& server, bool portal);
    Status single_sign_on(const gp::GpSamlRequest& saml, const http::Url& server, bool portal, Credentials& creds);
    // The login request to `server`, its challenges answered, until the reply parses as a T.
    template <class T, class Parse>
    Result<T> answer_rounds(gp::GpInterface iface, const http::Url& server, Credentials& creds, Parse&& parse);
    Result<gp::GpLoginResult> gateway_login(const http::Url& gateway, Credentials& creds);
    // Where this host is, by the portal's internal-host-detection (logged).
    InternalVerdict locate(const gp::GpPortalConfig& config);
    Result<http::Url> choose_gateway(const gp::GpPortalConfig& config, const std::string& region,
                                     const InternalVerdict& where);

    GpRequestSender& http_;
    GpLoginSettings settings_;
    LoginPrompter& prompter_;
    LoginAnswers answers_;
    bool rejected_ = false;
    bool saved_refused_ = false;
    bool no_tunnel_needed_ = false;
    LatencyProbeThreads probe_threads_;  // joined when the login object goes
};

}  // namespace espvpn::session
