#include "src/cli/tunnel_command.h"

#include <cstdlib>
#include <ctime>
#include <ostream>

#include "protocols/gp/session_cookie.h"
#include "src/cli/exit_codes.h"
#include "src/cli/https_settings.h"
#include "src/cli/sso_settings.h"
#include "src/cli/terminal_prompter.h"
#include "src/io/https_client.h"
#include "src/log/logger.h"
#include "src/session/gp/login.h"
#include "src/session/gp/tunnel.h"
#include "src/session/gp/tunnel_setup.h"
#include "src/sso/invoking_user.h"

namespace espvpn::cli {

namespace {

// The invoking user's portal cookie store (docs/GP-LOGIN.md).
Result<session::PortalCookieCache> cookie_cache(session::StateFiles& files,
                                                const std::optional<session::CookieCacheLocation>& prepared = {}) {
    if (prepared) return session::PortalCookieCache(*prepared, files);
    auto user = sso::invoking_user();
    if (!user) return user.error();
    return session::PortalCookieCache(
        session::cookie_cache_location(user->uid, user->gid, user->home, user->is_root_alone, std::getenv("XDG_STATE_HOME")),
        files);
}

std::int64_t unix_now() { return static_cast<std::int64_t>(std::time(nullptr)); }

gp::GpClientInfo client_info(const ClientOptions& o) {
    gp::GpClientInfo c;
    if (o.os == "win") c.clientos = "Windows";
    else if (o.os == "mac-intel") c.clientos = "Mac";
    else if (o.os == "android") c.clientos = "Android";
    else if (o.os == "apple-ios") c.clientos = "iOS";
    else c.clientos = "Linux";
    c.os_version = o.os;  // OC sends its platform name here
    c.computer = reported_hostname(o);
    if (!o.version_string.empty()) c.app_version = o.version_string;
    c.ipv6 = !o.disable_ipv6;
    return c;
}

// Accepts the bare cookie, or a COOKIE='...' line as --authenticate prints it.
Result<gp::GpSessionCookie> cookie_from_text(std::string_view text) {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
    if (text.rfind("COOKIE=", 0) == 0) text.remove_prefix(7);
    if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') text = text.substr(1, text.size() - 2);
    auto cookie = gp::GpSessionCookie::decode(text);
    if (!cookie) return make_error("the GlobalProtect cookie is not usable: " + cookie.error().message);
    return cookie;
}

// GlobalProtect in the command outline: the portal/gateway login (or a cookie), then
// getconfig + HIP, the tunnel, and the logout request once it is down.
class GpCommand final : public ProtocolCommand {
public:
    explicit GpCommand(session::StateFiles& files) : files_(&files) {}
    void use_state_files(session::StateFiles& files, std::optional<session::CookieCacheLocation> cookies) override {
        files_ = &files;
        cookies_ = std::move(cookies);
    }
    Status parse_target(const ClientOptions& options) override {
        auto target = session::parse_gp_login_target(options.server, options.usergroup);
        if (!target) return target.error();
        target_ = std::move(*target);
        client_ = client_info(options);
        return {};
    }
    std::optional<int> use_cookie(const ClientOptions& options, std::string_view text) override;
    std::optional<int> log_in(ClientOptions& options, io::HttpsClient& https, session::LoginPrompter& prompter,
                              const LoginInputs& inputs) override;
    http::Url server() const override { return auth_.gateway; }
    http::Url login_server() const override { return target_.server; }
    Secret cookie_text() const override { return auth_.cookie.encode(); }
    std::string no_tunnel_reason() const override { return no_tunnel_; }
    int captive_exception_timeout_s() const override {
        return static_cast<int>(auth_.captive_portal_exception_timeout.value_or(0));
    }
    int connect(ClientOptions& options, io::HttpsClient& https, ProcessControl& process,
                session::TunnelOptions& tunnel) override;

private:
    session::GpRequestSender& requests(const ClientOptions& o, io::HttpsClient& https) {
        if (!requests_)
            requests_.emplace(https, o.useragent.empty() ? std::string(gp::kUserAgent) : o.useragent, o.dump_http_traffic);
        return *requests_;
    }

    session::GpLoginTarget target_;
    gp::GpClientInfo client_;
    std::optional<session::GpRequestSender> requests_;
    session::GpAuthenticated auth_;
    std::string no_tunnel_;
    session::StateFiles* files_;
    std::optional<session::CookieCacheLocation> cookies_;  // root's, before the privilege split
};

std::optional<int> GpCommand::use_cookie(const ClientOptions&, std::string_view text) {
    auto cookie = cookie_from_text(text);
    if (!cookie) {
        LOG_ERROR << cookie.error().message;
        return kExitError;
    }
    if (cookie->computer.empty()) cookie->computer = client_.computer;
    client_.computer = cookie->computer;  // the gateway checks it against the login
    auth_.gateway = target_.server;
    auth_.cookie = std::move(*cookie);
    auth_.app_version = client_.app_version;
    LOG_INFO << "using the given cookie for " << auth_.cookie.user << " on " << auth_.gateway.host;
    return std::nullopt;
}

std::optional<int> GpCommand::log_in(ClientOptions& options, io::HttpsClient& https, session::LoginPrompter& prompter,
                                    const LoginInputs& inputs) {
    no_tunnel_.clear();  // --always-on logs in again: this attempt's verdict only
    session::GpLoginSettings settings;
    settings.target = target_;
    settings.user = options.user;
    settings.client = client_;
    settings.authgroup = options.authgroup;
    settings.gateway_by_latency = options.gateway_by_latency;
    settings.latency_budget = std::chrono::milliseconds(std::min(3000, options.http_timeout_s * 1000));
    if (options.gateway_by_latency) {
        // Probes get timeouts of the budget, so a silent gateway is given up on in time.
        auto probe = https_config(options);
        probe.tls.connect_timeout = probe.tls.io_timeout = settings.latency_budget;
        auto credentials = io::TlsCredentials::load(probe.tls);
        if (!credentials) {
            LOG_ERROR << credentials.error().message;
            return kExitError;
        }
        settings.probe_credentials = std::move(*credentials);
    }
    settings.internal_detection = !options.no_internal_detection;
    settings.client_certificate = !options.certificate.empty();
    settings.form_entries = inputs.form_entries;
    settings.token = inputs.token;
    settings.sso = sso_browser(options);
    // The portal cookie of an earlier run: only for a portal login without a SAML-cookie helper.
    std::optional<session::PortalCookieCache> cache;
    if (!options.no_cookie_cache && target_.entry != session::GpEntryPoint::gateway && target_.saml_field.empty()) {
        auto opened = cookie_cache(*files_, cookies_);
        if (!opened) LOG_WARN << "no saved portal cookies: " << opened.error().message;
        else cache.emplace(std::move(*opened));
    }
    if (cache) {
        auto saved = cache->load(target_.server, unix_now());
        if (!saved) LOG_WARN << "not using a saved portal cookie: " << saved.error().message;
        else if (*saved) settings.saved_cookie = std::move(**saved);
        else LOG_DEBUG << "no saved portal cookie for " << target_.server.host << " in " << cache->location().path();
    }
    session::GpLogin login(requests(options, https), std::move(settings), prompter);
    auto done = login.run();
    https.log_summary("login");
    if (cache && login.saved_cookie_refused() && (!done || done->portal_userauthcookie.empty()) &&
        (!done || done->portal_prelogonuserauthcookie.empty())) {
        if (auto gone = cache->forget(&target_.server); !gone) LOG_WARN << gone.error().message;
    }
    if (!done && login.no_tunnel_needed()) {
        // As the official client: inside the corporate network with no internal gateway,
        // there is nothing to connect; that is not a failure of the run.
        no_tunnel_ = done.error().message;
        LOG_INFO << no_tunnel_ << " (--no-internal-detection: use the external gateways anyway)";
        return kExitOk;
    }
    if (!done) {
        LOG_ERROR << done.error().message;
        return login.credentials_rejected() ? kExitCookieRejected : kExitError;
    }
    if (cache && done->portal_cookie_fresh) {
        session::SavedPortalCookie keep;
        keep.user = done->portal_user;
        keep.userauthcookie = done->portal_userauthcookie.clone();
        keep.prelogonuserauthcookie = done->portal_prelogonuserauthcookie.clone();
        const auto lifetime = done->portal_cookie_lifetime ? done->portal_cookie_lifetime->count()
                                                           : session::kDefaultCookieLifetimeS;
        keep.expires = unix_now() + lifetime;
        if (auto st = cache->save(target_.server, keep); !st)
            LOG_WARN << "the portal cookie is not kept for the next run: " << st.error().message;
        else
            LOG_INFO << "the portal's authentication cookie for " << keep.user << " is kept for "
                     << lifetime / 60 << " min" << (done->portal_cookie_lifetime ? " (the portal's lifetime)" : "")
                     << " in " << cache->location().path() << " (--no-cookie-cache: not kept; "
                     << "--forget-cookies: removed)";
    }
    auth_ = std::move(*done);
    client_.app_version = auth_.app_version;
    return std::nullopt;
}

// Gateway config and HIP, the tunnel until a signal, then logout.
int GpCommand::connect(ClientOptions& options, io::HttpsClient& https, ProcessControl& process,
                       session::TunnelOptions& t) {
    // A copy: a session ended for a captive portal is used again (tunnel_command.cpp).
    session::GpGatewaySession gateway(requests(options, https), auth_.gateway, auth_.cookie.clone(), client_);
    int rc = kExitOk;
    auto setup = gateway.fetch_config();
    if (!setup) {
        LOG_ERROR << setup.error().message;
        https.log_summary("connect");
        return gateway.cookie_rejected() ? kExitCookieRejected : kExitError;
    }
    if (auto sent = gateway.check_hip(*setup, {options.csd_wrapper, options.csd_user}); !sent) {
        LOG_ERROR << sent.error().message;
        rc = gateway.cookie_rejected() ? kExitCookieRejected : kExitError;
    }
    LOG_INFO << "tunnel configuration from " << auth_.gateway.host << ":\n" << session::describe_tunnel_setup(*setup);
    bool logout = true;
    Status logged_out;
    if (rc == kExitOk && options.dry_run) {
        LOG_INFO << "dry run: not opening the tunnel; logging out";
    } else if (rc == kExitOk) {
        // The periodic HIP check (hip_renewal.h) on a connection of its own: the session's
        // attempts use `https` on their thread meanwhile.
        auto hip_https = io::HttpsClient::create(https_config(options));
        if (!hip_https) {
            LOG_ERROR << hip_https.error().message;
            return kExitError;
        }
        session::GpRequestSender hip_sender(*hip_https, options.useragent.empty() ? std::string(gp::kUserAgent) : options.useragent,
                                            options.dump_http_traffic);
        session::GpGatewaySession hip_gateway = gateway.with_sender(hip_sender);
        session::HipRenewalPlan hip;
        hip.gateway = &hip_gateway;
        hip.hip = {options.csd_wrapper, options.csd_user};
        const unsigned period =
            session::hip_period_s(static_cast<unsigned>(options.force_trojan_s), auth_.hip_report_interval,
                                  setup->hip_report_interval_s);
        hip.period = std::chrono::seconds(period);
        if (options.force_trojan_s > 0) {
            if (auth_.hip_report_interval)
                LOG_INFO << "HIP: --force-trojan=" << options.force_trojan_s << " overrides the portal's interval of "
                         << *auth_.hip_report_interval << " s";
        } else if (auth_.hip_report_interval || setup->hip_report_interval_s) {
            LOG_INFO << "HIP: the " << (auth_.hip_report_interval ? "portal" : "gateway") << " sets a report interval of "
                     << (auth_.hip_report_interval ? *auth_.hip_report_interval : setup->hip_report_interval_s) << " s";
        }
        process.background();  // -b: from here on, the daemon child
        auto end = session::run_gp_tunnel(*setup, t, gateway, logged_out, &hip);
        hip_https->close_all();
        if (!end) {
            LOG_ERROR << end.error().message;
            rc = kExitError;
        } else {
            rc = exit_code(*end, t.always_on);
            // SIGINT/SIGTERM: the session loop sent the logout (or could not: no connection).
            // A captive portal: the session is kept for when the portal lets go (no logout).
            logout = *end != session::TunnelEnd::user_detach && *end != session::TunnelEnd::user_logout &&
                     *end != session::TunnelEnd::captive_portal;
        }
    }
    if (logout) logged_out = gateway.logout();
    if (!logged_out) {
        LOG_ERROR << logged_out.error().message;
        if (rc == kExitOk) rc = kExitError;
    }
    https.log_summary("session");
    return rc;
}

}  // namespace

std::unique_ptr<ProtocolCommand> make_gp_command(session::StateFiles& files) {
    return std::make_unique<GpCommand>(files);
}

int forget_gp_cookies(const ClientOptions& options, session::StateFiles& files) {
    auto cache = cookie_cache(files);
    if (!cache) {
        LOG_ERROR << cache.error().message;
        return kExitError;
    }
    std::optional<http::Url> portal;
    if (!options.forget_portal.empty()) {
        auto target = session::parse_gp_login_target(options.forget_portal, "");
        if (!target) {
            LOG_ERROR << "--forget-cookies: " << target.error().message;
            return kExitError;
        }
        portal = target->server;
    }
    auto removed = cache->forget(portal ? &*portal : nullptr);
    if (!removed) {
        LOG_ERROR << removed.error().message;
        return kExitError;
    }
    LOG_INFO << "removed " << *removed << " saved portal cookie" << (*removed == 1 ? "" : "s")
             << (portal ? " of " + portal->host + ":" + std::to_string(portal->port) : std::string()) << " from "
             << cache->location().path();
    return kExitOk;
}

}  // namespace espvpn::cli
