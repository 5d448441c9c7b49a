#include "src/cli/anyconnect_command.h"

#include <ostream>

#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/session_cookie.h"
#include "src/cli/exit_codes.h"
#include "src/cli/gp_command.h"
#include "src/cli/https_settings.h"
#include "src/cli/login_inputs.h"
#include "src/cli/terminal_prompter.h"
#include "src/log/logger.h"
#include "src/session/ac_dtls_link.h"
#include "src/session/ac_login.h"
#include "src/session/ac_tunnel.h"

namespace espvpn::cli {

namespace {

std::string user_agent(const ClientOptions& o) {
    if (!o.useragent.empty()) return o.useragent;
    return std::string(anyconnect::kUserAgentPrefix) +
           (o.version_string.empty() ? std::string(anyconnect::kDefaultVersion) : o.version_string);
}

Result<Secret> cookie_from_options(ClientOptions& o) {
    Secret text;
    if (o.cookie_on_stdin) {
        auto line = read_stdin_line("the cookie on standard input");
        if (!line) return line.error();
        text = std::move(*line);
    } else {
        text = std::move(o.cookie);
    }
    auto webvpn = anyconnect::webvpn_from_cookie_text(text.reveal_text());
    if (!webvpn) return make_error("the AnyConnect cookie is not usable: " + webvpn.error().message);
    return webvpn;
}

}  // namespace

int run_anyconnect(ClientOptions& options, std::ostream& out) {
    auto url = http::parse_url(options.server);
    if (!url) {
        LOG_ERROR << "server URL: " << url.error().message;
        return kExitError;
    }
    if (!options.usergroup.empty()) url->target = "/" + options.usergroup;
    TerminalPrompter prompter(options.non_interactive, options.no_passwd, options.passwd_on_stdin);
    auto inputs = login_inputs(options);
    if (!inputs) {
        LOG_ERROR << inputs.error().message;
        return kExitError;
    }
    if (auto st = ask_key_password_if_needed(options, prompter); !st) {
        LOG_ERROR << st.error().message;
        return kExitError;
    }
    auto https = io::HttpsClient::create(https_config(options));
    if (!https) {
        LOG_ERROR << https.error().message;
        return kExitError;
    }

    // 1. A session: from a cookie, or by logging in.
    session::AcAuthenticated auth;
    if (options.cookie_on_stdin || !options.cookie.empty()) {
        auto webvpn = cookie_from_options(options);
        if (!webvpn) {
            LOG_ERROR << webvpn.error().message;
            return kExitError;
        }
        auth.server = http::Url{url->host, url->port, "/"};
        auth.webvpn = std::move(*webvpn);
        LOG_INFO << "using the given cookie for " << auth.server.host;
    } else {
        session::AcLoginSettings settings;
        settings.server = *url;
        settings.user = options.user;
        settings.authgroup = options.authgroup;
        settings.form_entries = inputs->form_entries;
        settings.token = inputs->token;
        settings.user_agent = user_agent(options);
        if (!options.version_string.empty()) settings.client.version = options.version_string;
        settings.client.device_id = options.os;
        settings.dump_traffic = options.dump_http_traffic;
        if (!options.certificate.empty()) settings.client_certificate = https->credentials()->client_subject();
        session::AcLogin login(*https, std::move(settings), prompter);
        auto done = login.run();
        https->log_summary("login");
        if (!done) {
            LOG_ERROR << "login failed: " << done.error().message;
            return kExitError;
        }
        auth = std::move(*done);
    }

    const auto peer = https->peer(auth.server.host, auth.server.port);
    switch (options.action) {
        case Action::authenticate: {
            out << "COOKIE=" << shell_quote(anyconnect::cookie_text(auth.webvpn).reveal_text()) << "\n";
            out << "HOST=" << shell_quote(peer ? peer->address : auth.server.host) << "\n";
            out << "CONNECT_URL=" << shell_quote(auth.server.to_string()) << "\n";
            out << "FINGERPRINT=" << shell_quote(peer ? peer->pin : "") << "\n";
            out << "RESOLVE=" << shell_quote(auth.server.host + ":" + (peer ? peer->address : auth.server.host))
                << "\n";
            out.flush();
            https->close_all();
            return kExitOk;
        }
        case Action::cookie_only:
            out << anyconnect::cookie_text(auth.webvpn).reveal_text() << "\n";
            out.flush();
            https->close_all();
            return kExitOk;
        default: break;
    }
    if (options.print_cookie) out << anyconnect::cookie_text(auth.webvpn).reveal_text() << std::endl;

    // 2. The tunnel, on the login's TLS connection.
    session::AcTunnelOptions t;
    t.host = {options.interface_name, options.script, options.verbosity, options.disable_ipv6};
    t.mtu = options.mtu;
    t.base_mtu = options.base_mtu;
    t.hostname = options.local_hostname;
    t.user_agent = user_agent(options);
    t.no_dtls = options.no_dtls;
    t.dtls_ciphers = options.dtls_ciphers;
    t.dtls12_ciphers = options.dtls12_ciphers;
    t.force_dpd_s = options.force_dpd_s;
    t.dry_run = options.dry_run;
    t.stats_json = options.stats_json;
    t.reconnect_timeout = std::chrono::seconds(options.reconnect_timeout_s);
    session::AcDtlsFactory dtls;
    if (!options.no_dtls) {
        session::AcDtlsLinkOptions d;
        d.local_port = options.dtls_local_port;
        d.retry = std::chrono::seconds(options.esp_retry_interval_s);
        d.force_dpd_s = options.force_dpd_s;
        dtls = session::make_ac_dtls_factory(d);
    }
    auto end = session::run_ac_tunnel(*https, auth, t, dtls);
    https->close_all();
    if (!end) {
        LOG_ERROR << end.error().message;
        return kExitError;
    }
    switch (*end) {
        case session::AcTunnelEnd::user_logout:
        case session::AcTunnelEnd::user_detach: LOG_INFO << session::describe(*end); return kExitOk;
        case session::AcTunnelEnd::cookie_rejected:
            LOG_ERROR << "the server rejected the cookie; exiting";
            return kExitCookieRejected;
        default: LOG_ERROR << session::describe(*end) << "; exiting"; return kExitError;
    }
}

}  // namespace espvpn::cli
