#include "src/session/gp/login.h"

#include <variant>

#include "protocols/gp/saml.h"
#include "src/log/logger.h"

namespace espvpn::session {

struct GpLogin::Credentials {
    gp::GpCredentials form;
    bool interactive = false;  // a challenge or SAML round happened: no blind replay (as OC)
    bool cert_only = false;    // trying the client certificate alone (empty password)
    bool last_was_token = false;  // OC alternates: a challenge after a token code is a password
    bool sso = false;             // the user and cookie came from a single sign-on in a browser
    bool saved_cookie = false;    // the portal cookie saved by an earlier run, no password
};

namespace {

bool is_saml_field(std::string_view f) { return f == "prelogin-cookie" || f == "portal-userauthcookie"; }

std::string describe_failure(const gp::GpServerError& e, const GpReplyBody& reply) {
    std::string text = e.message.empty() ? "no reason given" : e.message;
    if (reply.status != 200 || !reply.pan_reason.empty()) {
        text += " (HTTP " + std::to_string(reply.status);
        if (!reply.pan_reason.empty()) text += ", " + reply.pan_reason;
        text += ")";
    }
    return text;
}

}  // namespace

Result<GpLoginTarget> parse_gp_login_target(std::string_view url, std::string_view usergroup) {
    auto parsed = http::parse_url(url);
    if (!parsed) return parsed.error();
    GpLoginTarget target;
    target.server = *parsed;
    target.server.target = "/";
    // The URL path may carry the usergroup, as openconnect accepts it.
    std::string group(usergroup);
    std::string path = parsed->target.substr(0, parsed->target.find('?'));
    while (!path.empty() && path.front() == '/') path.erase(0, 1);
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (group.empty()) group = path;
    else if (!path.empty() && path != group)
        return make_error("the URL path '/" + path + "' and --usergroup '" + group + "' disagree");
    if (group.empty()) return target;
    auto colon = group.find(':');
    std::string where = group.substr(0, colon);
    if (where == "portal") target.entry = GpEntryPoint::portal;
    else if (where == "gateway") target.entry = GpEntryPoint::gateway;
    else
        return make_error("usergroup '" + group +
                          "' is not one of portal, gateway, portal:prelogin-cookie, gateway:prelogin-cookie, "
                          "portal:portal-userauthcookie, gateway:portal-userauthcookie");
    if (colon != std::string::npos) {
        target.saml_field = group.substr(colon + 1);
        if (!is_saml_field(target.saml_field))
            return make_error("usergroup '" + group + "': the field after ':' must be prelogin-cookie or "
                              "portal-userauthcookie");
    }
    return target;
}

Result<GpAuthenticated> GpLogin::run() {
    rejected_ = false;
    const auto& target = settings_.target;
    if (target.entry != GpEntryPoint::gateway) {
        bool portal_missing = false;
        auto done = via_portal(&portal_missing);
        if (done || !portal_missing || target.entry == GpEntryPoint::portal) return done;
        LOG_INFO << target.server.host << " has no GlobalProtect portal; trying it as a gateway";
    }
    return via_gateway(target.server, nullptr, nullptr);
}

Result<gp::GpPrelogin> GpLogin::prelogin(gp::GpInterface iface, const http::Url& server, bool* wrong_interface) {
    const char* what = iface == gp::GpInterface::Portal ? "portal prelogin" : "gateway prelogin";
    auto reply = http_.send(server, gp::prelogin_request(iface, settings_.client), true);
    if (!reply) return reply.error();
    auto outcome = gp::parse_prelogin_reply(reply->body.reveal_text());
    if (!outcome) return make_error(std::string(what) + " reply from " + server.host + ": " + outcome.error().message);
    if (auto* e = std::get_if<gp::GpServerError>(&*outcome)) {
        *wrong_interface = e->kind == gp::GpErrorKind::WrongInterface;
        return make_error(std::string(what) + " on " + server.host + " failed: " + describe_failure(*e, *reply));
    }
    if (std::holds_alternative<gp::GpChallenge>(*outcome))
        return make_error(std::string(what) + " on " + server.host + " answered with a challenge; expected a form");
    auto pre = std::get<gp::GpPrelogin>(std::move(*outcome));
    if (!pre.authentication_message.empty()) LOG_INFO << pre.authentication_message;
    return pre;
}

Status GpLogin::single_sign_on(const gp::GpSamlRequest& saml, const http::Url& server, bool portal,
                               Credentials& creds) {
    SsoStart start;
    if (saml.method == gp::GpSamlRequest::Method::Redirect) start.url = saml.decoded;
    else start.html = saml.decoded;
    start.server = server.host + (portal ? " (portal)" : " (gateway)");
    SsoFinish finish;
    finish.gp_acs = true;
    LOG_INFO << "SAML login required by " << start.server << " ("
             << (saml.method == gp::GpSamlRequest::Method::Redirect ? "REDIRECT" : "POST")
             << (saml.default_browser ? ", default browser" : "") << ")";
    if (!saml.default_browser && !settings_.sso->sees_responses())
        LOG_WARN << start.server << " does not use \"default browser\" SAML: the browser's result may never come "
                 << "back to espvpn (the gateway needs \"Use default browser for SAML authentication\", or use "
                 << "--sso-browser)";
    auto got = settings_.sso->run(start, finish);
    if (!got) return got.error();
    Result<gp::GpSamlResult> parsed = make_error("no result");
    if (got->kind == SsoResult::Kind::callback_url)
        parsed = gp::parse_globalprotect_callback(got->url.reveal_text());
    else if (got->kind == SsoResult::Kind::acs_response)
        parsed = gp::parse_saml_acs_result(got->headers, got->body.reveal_text());
    else
        return make_error("single sign-on at " + start.server + ": the browser returned a token, not a SAML result");
    if (!parsed) return make_error("single sign-on at " + start.server + ": " + parsed.error().message);
    if (!settings_.user.empty() && settings_.user != parsed->username)
        LOG_INFO << "SAML user name " << parsed->username << " (not -u " << settings_.user << ")";
    LOG_INFO << "single sign-on at " << start.server << " done: SAML user " << parsed->username << ", "
             << parsed->field;
    creds.form.user = parsed->username;
    creds.form.secret = std::move(parsed->value);
    creds.form.secret_field = parsed->field;
    creds.interactive = true;
    creds.sso = true;
    return {};
}

Result<GpLogin::Credentials> GpLogin::ask_credentials(const gp::GpPrelogin& info, const http::Url& server,
                                                      bool portal) {
    Credentials creds;
    creds.form.user = settings_.user;
    const auto& saml_field = settings_.target.saml_field;
    if (info.saml && saml_field.empty() && settings_.sso) {
        if (auto st = single_sign_on(*info.saml, server, portal, creds); !st) return st.error();
        return creds;
    }
    if (info.saml && saml_field.empty()) {
        // The browser round trip happens outside espvpn; we only take its result.
        std::string how = info.saml->method == gp::GpSamlRequest::Method::Redirect
                              ? "open this URL in a browser:\n  " + info.saml->decoded
                              : "load this IdP form in a browser (save it as a .html file):\n" + info.saml->decoded;
        prompter_.show("SAML login required by " + server.host + ": " + how +
                       "\nWhen it finishes, enter the saml-username and the prelogin-cookie it returned. "
                       "(A helper such as gp-saml-gui can feed them: -u USER --usergroup "
                       "gateway:prelogin-cookie --passwd-on-stdin.)");
    }
    const bool saml = info.saml.has_value() || !saml_field.empty();
    if (saml) {
        creds.form.secret_field = saml_field.empty() ? "prelogin-cookie" : saml_field;
        creds.interactive = true;
    }
    const bool cert_user = settings_.client_certificate && !info.ccusername.empty() && !saml;
    if (creds.form.user.empty()) {
        if (cert_user) {
            creds.form.user = info.ccusername;
            LOG_INFO << "user name " << info.ccusername << " from the client certificate";
        } else {
            LoginField f{LoginField::Kind::text, "_login", "user",
                         (saml ? std::string("SAML user name") : info.username_label) + ":", {}, false};
            auto user = answers_.fill(f);
            if (!user) return user.error();
            creds.form.user = std::string(user->reveal_text());
        }
    }
    if (cert_user) {
        // Certificate-only gateways ignore the password; ask for one only if refused.
        creds.cert_only = true;
        return creds;
    }
    // openconnect's heuristic: a password label other than "Password" means the login form
    // itself wants the one-time code.
    const bool token = !saml && info.password_is_otp() && answers_.has_token();
    LoginField f{LoginField::Kind::secret, "_login", saml ? creds.form.secret_field : "passwd",
                 (saml ? creds.form.secret_field : info.password_label) + ":", {}, token};
    auto secret = answers_.fill(f);
    if (!secret) return secret.error();
    creds.form.secret = std::move(*secret);
    creds.last_was_token = token;
    return creds;
}

template <class T, class Parse>
Result<T> GpLogin::answer_rounds(gp::GpInterface iface, const http::Url& server, Credentials& creds, Parse&& parse) {
    const std::string what = (iface == gp::GpInterface::Portal ? "portal login on " : "gateway login on ") + server.host;
    for (int round = 0; round <= settings_.max_challenge_rounds; ++round) {
        auto reply = http_.send(server, gp::login_request(iface, server.host, settings_.client, creds.form));
        if (!reply) return reply.error();
        auto outcome = parse(reply->body.reveal_text());
        if (!outcome) return make_error(what + ": unusable reply: " + outcome.error().message);
        if (auto* done = std::get_if<T>(&*outcome)) return std::move(*done);
        if (auto* c = std::get_if<gp::GpChallenge>(&*outcome)) {
            LOG_INFO << what << ": challenge round " << round + 1;
            const bool token = !creds.last_was_token && answers_.has_token();
            LoginField f{LoginField::Kind::secret, "_challenge", "passwd",
                         c->prompt.empty() ? std::string("Challenge:") : c->prompt, {}, token};
            auto answer = answers_.fill(f);
            if (!answer) return answer.error();
            creds.last_was_token = token;
            creds.form.secret = std::move(*answer);
            creds.form.secret_field = "passwd";
            creds.form.input_str = c->input_str;
            creds.interactive = true;
            creds.cert_only = false;
            continue;
        }
        const auto& e = std::get<gp::GpServerError>(*outcome);
        if (creds.cert_only && e.kind == gp::GpErrorKind::AuthFailed) {
            LOG_INFO << what << ": the client certificate alone was not enough; asking for the password";
            auto secret = answers_.fill({LoginField::Kind::secret, "_login", "passwd", "Password:", {}, false});
            if (!secret) return secret.error();
            creds.form.secret = std::move(*secret);
            creds.cert_only = false;
            continue;
        }
        rejected_ = e.kind == gp::GpErrorKind::AuthFailed || e.kind == gp::GpErrorKind::CookieRejected;
        return make_error(what + " failed: " + describe_failure(e, *reply));
    }
    return make_error(what + ": more than " + std::to_string(settings_.max_challenge_rounds) + " challenge rounds");
}

Result<gp::GpLoginResult> GpLogin::gateway_login(const http::Url& gateway, Credentials& creds) {
    return answer_rounds<gp::GpLoginResult>(gp::GpInterface::Gateway, gateway, creds, [this](std::string_view body) {
        return gp::parse_gateway_login_reply(body, settings_.client.computer);
    });
}

Result<GpAuthenticated> GpLogin::via_portal(bool* portal_missing) {
    const auto& server = settings_.target.server;
    auto pre = prelogin(gp::GpInterface::Portal, server, portal_missing);
    if (!pre) return pre.error();
    Result<Credentials> creds = Credentials{};
    Result<gp::GpPortalConfig> config = make_error("no portal login attempted");
    if (auto saved = portal_with_saved_cookie(server, *creds); !saved) {
        return saved.error();
    } else if (*saved) {
        config = std::move(**saved);
    } else {
        creds = ask_credentials(*pre, server, true);
        if (!creds) return creds.error();
        config =
            answer_rounds<gp::GpPortalConfig>(gp::GpInterface::Portal, server, *creds, gp::parse_portal_config_reply);
        if (!config) return config.error();
    }
    if (!config->has_config)
        return make_error("the portal " + server.host + " has no configuration for this client (has-config=no); "
                          "another --os may help");
    if (!config->version.empty()) settings_.client.app_version = config->version;
    LOG_INFO << "portal " << server.host << " login succeeded";
    auto gateway = choose_gateway(*config, pre->region, locate(*config));
    if (!gateway) return gateway.error();

    // OC's rule: replay the portal credentials into the gateway when the portal
    // gave a cookie, or when no challenge/SAML round was involved.
    const bool fresh = !config->portal_userauthcookie.empty() || !config->portal_prelogonuserauthcookie.empty();
    creds->form.input_str.clear();
    if (fresh || !creds->saved_cookie) {  // a portal that renews nothing: the saved one goes on
        creds->form.portal_userauthcookie = config->portal_userauthcookie.clone();
        creds->form.portal_prelogonuserauthcookie = config->portal_prelogonuserauthcookie.clone();
    }
    const bool have_cookie =
        !creds->form.portal_userauthcookie.empty() || !creds->form.portal_prelogonuserauthcookie.empty();
    if (have_cookie && creds->interactive) {
        creds->form.secret = Secret();  // the cookie proves who we are
        creds->form.secret_field = "passwd";
    }
    // A single sign-on's prelogin-cookie is tried at the gateway too (the user logs
    // in once where the gateway takes it); refused, the gateway's own SAML follows.
    const bool replay = have_cookie || !creds->interactive || creds->sso;
    auto done = via_gateway(*gateway, replay ? &*creds : nullptr, &*config);
    if (done && config->hip_report_interval) done->hip_report_interval = config->hip_report_interval;
    if (done) done->captive_portal_exception_timeout = config->captive_portal_exception_timeout;
    if (done && have_cookie && !(creds->saved_cookie && saved_refused_)) {
        done->portal_user = creds->form.user;
        done->portal_userauthcookie = creds->form.portal_userauthcookie.clone();
        done->portal_prelogonuserauthcookie = creds->form.portal_prelogonuserauthcookie.clone();
        done->portal_cookie_lifetime = config->cookie_lifetime;
        done->portal_cookie_fresh = fresh;
    }
    return done;
}

Result<std::optional<gp::GpPortalConfig>> GpLogin::portal_with_saved_cookie(const http::Url& server,
                                                                           Credentials& creds) {
    const auto& saved = settings_.saved_cookie;
    if (!saved || !settings_.target.saml_field.empty()) return std::optional<gp::GpPortalConfig>();
    if (!settings_.user.empty() && settings_.user != saved->user) {
        LOG_INFO << "portal " << server.host << ": the saved authentication cookie is " << saved->user
                 << "'s, not -u " << settings_.user << "'s; logging in";
        return std::optional<gp::GpPortalConfig>();
    }
    creds.form.user = saved->user;
    creds.form.portal_userauthcookie = saved->userauthcookie.clone();
    creds.form.portal_prelogonuserauthcookie = saved->prelogonuserauthcookie.clone();
    creds.form.secret_field = "passwd";
    creds.saved_cookie = true;
    LOG_INFO << "portal " << server.host << ": logging in as " << saved->user
             << " with the authentication cookie saved by an earlier login";
    auto config =
        answer_rounds<gp::GpPortalConfig>(gp::GpInterface::Portal, server, creds, gp::parse_portal_config_reply);
    if (config) return std::optional<gp::GpPortalConfig>(std::move(*config));
    if (!rejected_) return config.error();
    LOG_WARN << "portal " << server.host << " refused the saved authentication cookie (" << config.error().message
             << "); it is forgotten, logging in again";
    rejected_ = false;
    saved_refused_ = true;
    creds = Credentials{};
    return std::optional<gp::GpPortalConfig>();
}

Result<GpAuthenticated> GpLogin::via_gateway(const http::Url& gateway, Credentials* replay,
                                             const gp::GpPortalConfig* portal) {
    Result<gp::GpLoginResult> login = make_error("no login attempted");
    if (replay) {
        login = gateway_login(gateway, *replay);
        if (!login && !rejected_) return login.error();
        if (!login) {
            if (replay->saved_cookie) {
                LOG_WARN << "gateway " << gateway.host << " refused the saved authentication cookie ("
                         << login.error().message << "); it is forgotten, logging in to the gateway";
                saved_refused_ = true;
            } else {
                LOG_INFO << "gateway " << gateway.host << " did not accept the portal credentials ("
                         << login.error().message << "); logging in to it directly";
            }
            rejected_ = false;
        }
    }
    if (!login) {
        bool missing = false;
        auto pre = prelogin(gp::GpInterface::Gateway, gateway, &missing);
        if (!pre) return pre.error();
        auto creds = ask_credentials(*pre, gateway, false);
        if (!creds) return creds.error();
        if (portal) {
            creds->form.portal_userauthcookie = portal->portal_userauthcookie.clone();
            creds->form.portal_prelogonuserauthcookie = portal->portal_prelogonuserauthcookie.clone();
        }
        login = gateway_login(gateway, *creds);
        if (!login) return login.error();
    }
    LOG_INFO << "gateway " << gateway.host << " login succeeded as " << login->cookie.user
             << (login->authentication_source.empty() ? "" : " (" + login->authentication_source + ")");
    GpAuthenticated done;
    done.gateway = gateway;
    done.gateway.target = "/";
    done.cookie = std::move(login->cookie);
    done.app_version = settings_.client.app_version;
    return done;
}

InternalVerdict GpLogin::locate(const gp::GpPortalConfig& config) {
    for (const auto& problem : config.internal_host_check_problems)
        LOG_WARN << "portal config: not using " << problem;
    if (config.internal_host_checks.empty()) {
        InternalVerdict v{false, "outside the corporate network: the portal config has no internal-host-detection"};
        if (config.has_gateways(true)) LOG_INFO << v.reason;
        else LOG_DEBUG << v.reason;
        return v;
    }
    if (!settings_.internal_detection) {
        InternalVerdict v{false, "outside the corporate network: internal host detection is off "
                                 "(--no-internal-detection)"};
        LOG_INFO << v.reason;
        return v;
    }
    auto v = detect_internal_network(config.internal_host_checks, settings_.internal_detection_budget,
                                     settings_.reverse_lookup);
    LOG_INFO << v.reason;
    return v;
}

Result<http::Url> GpLogin::choose_gateway(const gp::GpPortalConfig& config, const std::string& region,
                                          const InternalVerdict& where) {
    auto gateways = config.preferred_gateways(region, where.inside);
    if (gateways.empty() && where.inside) {
        no_tunnel_needed_ = true;
        return make_error("no tunnel is needed: this host is inside the corporate network and the portal " +
                          settings_.target.server.host + " lists no internal gateway");
    }
    if (gateways.empty() && config.has_gateways(true))
        return make_error("the portal " + settings_.target.server.host +
                          " lists only internal gateways (policy/gateways/internal/list), for use inside the "
                          "corporate network, and this host is " + where.reason);
    if (gateways.empty())
        return make_error("portal config lists no external gateway (policy/gateways/external/list)");
    // Inside, --authgroup may name any gateway, internal or external.
    std::vector<gp::GpGateway> nameable = gateways;
    if (where.inside)
        for (auto& g : config.preferred_gateways(region, false)) nameable.push_back(std::move(g));
    auto label = [](const gp::GpGateway& g) {
        return g.description.empty() || g.description == g.address ? g.address
                                                                    : g.description + " (" + g.address + ")";
    };
    for (const auto& g : gateways) {
        auto prio = g.priority_for(region);
        LOG_DEBUG << "portal gateway " << label(g) << " priority " << (prio ? std::to_string(*prio) : "none");
    }
    const gp::GpGateway* chosen = nullptr;
    // openconnect's portal form is "_portal" with the select "gateway": -F _portal:gateway=NAME.
    const std::string* entry = answers_.entry("_portal", "gateway");
    const std::string wanted = !settings_.authgroup.empty() ? settings_.authgroup : entry ? *entry : std::string();
    const char* option = !settings_.authgroup.empty() ? "--authgroup" : "--form-entry _portal:gateway";
    if (!wanted.empty()) {
        for (const auto& g : nameable)
            if (g.description == wanted || g.address == wanted) chosen = &g;
        if (!chosen) {
            std::string names;
            for (const auto& g : nameable) names += (names.empty() ? "" : ", ") + label(g);
            return make_error(std::string(option) + " '" + wanted + "' names no gateway of this portal; it offers: " +
                              names);
        }
    } else if (settings_.gateway_by_latency && gateways.size() > 1) {
        std::vector<std::string> addresses;
        for (const auto& g : gateways) addresses.push_back(g.address);
        auto credentials = settings_.probe_credentials ? settings_.probe_credentials : http_.https().credentials();
        auto measured = probe_gateway_latency(addresses, credentials, settings_.latency_budget, probe_threads_);
        const GatewayLatency* best = nullptr;
        for (std::size_t i = 0; i < measured.size(); ++i) {
            const auto& m = measured[i];
            if (m.connect_time)
                LOG_INFO << "gateway " << label(gateways[i]) << ": TLS connect in "
                         << std::chrono::duration_cast<std::chrono::microseconds>(*m.connect_time).count() / 1000.0
                         << " ms";
            else LOG_INFO << "gateway " << label(gateways[i]) << ": " << m.error;
            if (m.connect_time && (!best || *m.connect_time < *best->connect_time)) {
                best = &m;
                chosen = &gateways[i];
            }
        }
        if (!chosen) LOG_WARN << "no gateway answered the latency probe; using the portal's priority order";
    }
    if (!chosen && gateways.size() > 1 && prompter_.offers_defaults()) {
        // A window offers the list, the preferred gateway first (openconnect's "_portal" form).
        LoginField field{LoginField::Kind::select, "_portal", "gateway", "Gateway:", {}, false};
        for (const auto& g : gateways) field.choices.push_back({g.address, label(g)});
        auto picked = answers_.choose(field);
        if (!picked) return picked.error();
        for (const auto& g : gateways)
            if (g.address == (*picked)->value) chosen = &g;
    }
    if (!chosen) chosen = &gateways.front();
    LOG_INFO << "gateway: " << label(*chosen) << (chosen->internal ? ", internal" : "") << " (" << gateways.size()
             << (where.inside ? " internal" : "") << " offered)";
    auto url = http::parse_url(chosen->address);
    if (!url) return make_error("the portal's gateway '" + chosen->address + "': " + url.error().message);
    url->target = "/";
    return *url;
}

}  // namespace espvpn::session
