#include "src/cli/gp_command.h"

#include <unistd.h>

#include <ostream>

#include "protocols/gp/session_cookie.h"
#include "src/cli/exit_codes.h"
#include "src/cli/process_control.h"
#include "src/cli/https_settings.h"
#include "src/cli/login_inputs.h"
#include "src/cli/terminal_prompter.h"
#include "src/io/https_client.h"
#include "src/log/logger.h"
#include "src/session/gp_login.h"
#include "src/session/gp_tunnel.h"
#include "src/session/gp_tunnel_setup.h"

namespace espvpn::cli {

namespace {

gp::GpClientInfo client_info(const ClientOptions& o) {
    gp::GpClientInfo c;
    if (o.os == "win") c.clientos = "Windows";
    else if (o.os == "mac-intel") c.clientos = "Mac";
    else if (o.os == "android") c.clientos = "Android";
    else if (o.os == "apple-ios") c.clientos = "iOS";
    else c.clientos = "Linux";
    c.os_version = o.os;  // OC sends its platform name here
    if (!o.local_hostname.empty()) {
        c.computer = o.local_hostname;
    } else {
        char name[256] = {};
        if (::gethostname(name, sizeof name - 1) == 0) c.computer = name;
        if (c.computer.empty()) c.computer = "localhost";
    }
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

}  // namespace

std::string shell_quote(std::string_view text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

int run_globalprotect(ClientOptions& options, std::ostream& out) {
    auto target = session::parse_gp_login_target(options.server, options.usergroup);
    if (!target) {
        LOG_ERROR << "server URL: " << target.error().message;
        return kExitError;
    }
    auto process = ProcessControl::prepare(options);
    if (!process) {
        LOG_ERROR << process.error().message;
        return kExitError;
    }
    auto client = client_info(options);
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
    session::GpTransport transport(*https, options.useragent.empty() ? std::string(gp::kUserAgent) : options.useragent,
                                   options.dump_http_traffic);

    // 1. A session: from a cookie, or by logging in.
    session::GpAuthenticated auth;
    if (options.cookie_on_stdin || !options.cookie.empty()) {
        Secret text = options.cookie_on_stdin ? Secret() : std::move(options.cookie);
        if (options.cookie_on_stdin) {
            auto line = read_stdin_line("the cookie on standard input");
            if (!line) {
                LOG_ERROR << line.error().message;
                return kExitError;
            }
            text = std::move(*line);
        }
        auto cookie = cookie_from_text(text.reveal_text());
        if (!cookie) {
            LOG_ERROR << cookie.error().message;
            return kExitError;
        }
        if (cookie->computer.empty()) cookie->computer = client.computer;
        client.computer = cookie->computer;  // the gateway checks it against the login
        auth.gateway = target->server;
        auth.cookie = std::move(*cookie);
        auth.app_version = client.app_version;
        LOG_INFO << "using the given cookie for " << auth.cookie.user << " on " << auth.gateway.host;
    } else {
        session::GpLoginSettings settings;
        settings.target = *target;
        settings.user = options.user;
        settings.client = client;
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
        settings.client_certificate = !options.certificate.empty();
        settings.form_entries = inputs->form_entries;
        settings.token = inputs->token;
        session::GpLogin login(transport, std::move(settings), prompter);
        auto done = login.run();
        https->log_summary("login");
        if (!done) {
            LOG_ERROR << done.error().message;
            return login.credentials_rejected() ? kExitCookieRejected : kExitError;
        }
        auth = std::move(*done);
        client.app_version = auth.app_version;
    }

    const auto peer = https->peer(auth.gateway.host, auth.gateway.port);
    switch (options.action) {
        case Action::authenticate: {
            Secret cookie = auth.cookie.encode();
            out << "COOKIE=" << shell_quote(cookie.reveal_text()) << "\n";
            out << "HOST=" << shell_quote(peer ? peer->address : auth.gateway.host) << "\n";
            out << "CONNECT_URL=" << shell_quote(auth.gateway.to_string()) << "\n";
            out << "FINGERPRINT=" << shell_quote(peer ? peer->pin : "") << "\n";
            out << "RESOLVE=" << shell_quote(auth.gateway.host + ":" + (peer ? peer->address : auth.gateway.host))
                << "\n";
            out.flush();
            https->close_all();
            return kExitOk;
        }
        case Action::cookie_only: {
            out << auth.cookie.encode().reveal_text() << "\n";
            out.flush();
            https->close_all();
            return kExitOk;
        }
        default: break;
    }
    if (options.print_cookie) out << auth.cookie.encode().reveal_text() << std::endl;

    // 2. Connect: gateway config and HIP, the ESP tunnel until a signal, then logout.
    session::GpGatewaySession gateway(transport, auth.gateway, std::move(auth.cookie), client);
    int rc = kExitOk;
    auto setup = gateway.fetch_config();
    if (!setup) {
        LOG_ERROR << setup.error().message;
        https->log_summary("connect");
        return gateway.cookie_rejected() ? kExitCookieRejected : kExitError;
    }
    session::GpHipSettings hip{options.csd_wrapper, options.csd_user};
    if (auto sent = gateway.check_hip(*setup, hip); !sent) {
        LOG_ERROR << sent.error().message;
        rc = gateway.cookie_rejected() ? kExitCookieRejected : kExitError;
    }
    LOG_INFO << "tunnel configuration from " << auth.gateway.host << ":\n" << session::describe_tunnel_setup(*setup);
    bool logout = true;
    if (rc == kExitOk && options.dry_run) {
        LOG_INFO << "dry run: not opening the tunnel; logging out";
    } else if (rc == kExitOk) {
        process->background();  // -b: from here on, the daemon child
        session::GpTunnelOptions t;
        t.after_setup = [&] { return process->drop_privileges(); };
        t.on_connected = [&] { process->tunnel_up(); };
        t.interface_name = options.interface_name;
        t.script = options.script;
        t.mtu = options.mtu;
        t.base_mtu = options.base_mtu;
        t.stats_json = options.stats_json;
        t.log_level = options.verbosity;
        t.disable_ipv6 = options.disable_ipv6;
        t.esp = !options.no_dtls;
        t.udp_local_port = options.dtls_local_port;
        if (options.force_dpd_s > 0) {
            t.dpd_interval = std::chrono::seconds(options.force_dpd_s);
            t.dead_after = 2 * t.dpd_interval;
        }
        t.esp_retry_interval = std::chrono::seconds(options.esp_retry_interval_s);
        t.reconnect_timeout = std::chrono::seconds(options.reconnect_timeout_s);
        session::GpGatewayLinks links;
        links.refetch = [&] { return gateway.fetch_config(); };
        // The login's kept-alive connection to the gateway if there is one (as openconnect does).
        links.connect = [&] { return https->release_connection(auth.gateway.host, auth.gateway.port); };
        links.cookie = &gateway.cookie();
        links.cookie_rejected = [&] { return gateway.cookie_rejected(); };
        links.forget_connections = [&] { https->close_all(); };
        {
            auto end = session::run_gp_tunnel(*setup, t, links);
            if (!end) {
                LOG_ERROR << end.error().message;
                rc = kExitError;
            } else {
                switch (*end) {
                    case session::TunnelEnd::user_logout: break;
                    case session::TunnelEnd::user_keep_cookie:
                        logout = false;
                        LOG_INFO << "disconnected; the session stays valid (SIGHUP)";
                        break;
                    case session::TunnelEnd::cookie_rejected: rc = kExitCookieRejected; break;
                    default: rc = kExitError; break;
                }
            }
        }
    }
    if (!logout) {
        https->close_all();
        return rc;
    }
    if (auto st = gateway.logout(); !st) {
        LOG_ERROR << st.error().message;
        if (rc == kExitOk) rc = kExitError;
    }
    https->log_summary("session");
    https->close_all();
    return rc;
}

}  // namespace espvpn::cli
