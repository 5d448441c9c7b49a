#include "src/cli/tunnel_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>

#include "src/cli/exit_codes.h"
#include "src/cli/channel_prompter.h"
#include "src/cli/https_settings.h"
#include "src/cli/privilege_split.h"
#include "src/cli/terminal_prompter.h"
#include "src/log/logger.h"
#include "src/session/gp/portal_cookie_cache.h"
#include "src/sso/invoking_user.h"

namespace espvpn::cli {

namespace {

session::TunnelOptions tunnel_options(const ClientOptions& o) {
    session::TunnelOptions t;
    t.host = {o.interface_name, o.script, o.verbosity, o.disable_ipv6, o.queue_len, o.kill_switch, o.allow_lan, {}};
    t.mtu = o.mtu;
    t.base_mtu = o.base_mtu;
    t.stats_json = o.stats_json;
    t.reconnect_timeout = std::chrono::seconds(o.reconnect_timeout_s);
    t.force_dpd_s = o.force_dpd_s;
    t.no_dtls = o.no_dtls;
    t.udp_local_port = o.dtls_local_port;
    t.udp_retry = std::chrono::seconds(o.esp_retry_interval_s);
    t.dry_run = o.dry_run;
    t.hostname = reported_hostname(o);
    t.keeps_privileges = o.setuid_user.empty();
    return t;
}

// --kill-switch: the portal's addresses, so that a new login to it (on its TCP port) is not
// blocked when it is not the gateway. Behind --proxy the proxy (allowed as the gateway's TCP
// peer) carries it: nothing more.
std::vector<host::KillSwitchService> login_servers(const io::HttpsClient& https, const http::Url& url) {
    const auto peer = https.peer(url.host, url.port);
    if (peer && peer->via_proxy) return {};
    std::vector<std::string> addresses = https.addresses_of(url.host);
    if (peer && !peer->address.empty() &&
        std::find(addresses.begin(), addresses.end(), peer->address) == addresses.end())
        addresses.push_back(peer->address);
    std::vector<host::KillSwitchService> out;
    for (std::string& a : addresses) out.push_back({std::move(a), url.port});
    return out;
}

// The error logged; the exit code for it.
int failed(const Error& e) {
    LOG_ERROR << e.message;
    return kExitError;
}

}  // namespace

std::string reported_hostname(const ClientOptions& o) {
    if (!o.local_hostname.empty()) return o.local_hostname;
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0 && name[0]) return name;
    return "localhost";
}

std::string shell_quote(std::string_view text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

int exit_code(session::TunnelEnd end) {
    switch (end) {
        case session::TunnelEnd::user_logout: return kExitOk;
        case session::TunnelEnd::user_detach:
            LOG_INFO << "disconnected; the session stays valid (SIGHUP)";
            return kExitOk;
        case session::TunnelEnd::cookie_rejected:
            LOG_ERROR << "the server rejected the cookie; exiting";
            return kExitCookieRejected;
        default: LOG_ERROR << session::describe(end) << "; exiting"; return kExitError;
    }
}

int run_tunnel_command(ClientOptions& options, std::ostream& out, ProtocolCommand& protocol) {
    if (Status st = protocol.parse_target(options); !st) {
        LOG_ERROR << "server URL: " << st.error().message;
        return kExitError;
    }
    auto process = ProcessControl::prepare(options);  // early: a bad user or pid file fails before the login
    if (!process) return failed(process.error());
    // The CSD/HIP wrapper's user, decided as root (the session process then runs as that user).
    options.csd_user = csd_run_as(options);
    // Root: the broker stays here; the session process (unprivileged) goes on below.
    host::BrokerOptions broker_options;
    broker_options.host = tunnel_options(options).host;
    // The state files the session may ask the broker for (root's, when it cannot write them
    // itself): --stats-json, an HOTP token file, the invoking user's portal cookie cache.
    if (!options.stats_json.empty()) broker_options.state_files.push_back(options.stats_json);
    if (const std::string_view secret = options.token_secret.reveal_text();
        options.token_mode == "hotp" && secret.size() > 1 && secret[0] == '@')
        broker_options.state_files.emplace_back(secret.substr(1));
    if (auto user = sso::invoking_user(); user && !options.no_cookie_cache && geteuid() == 0)
        broker_options.state_dir = session::cookie_cache_location(user->uid, user->gid, user->home, user->is_root_alone,
                                                                  std::getenv("XDG_STATE_HOME"))
                                       .path();
    auto split = split_privileges(options, *process, std::move(broker_options));
    if (!split) return failed(split.error());
    if (const int* broker_exit = std::get_if<int>(&*split)) return *broker_exit;
    const std::shared_ptr<host::BrokerChannel> broker = std::get<SessionSide>(*split).broker;
    TerminalPrompter terminal(options.non_interactive, options.no_passwd, options.passwd_on_stdin);
    ChannelPrompter channel(options.prompt_fd, options.no_passwd);
    if (options.prompt_fd >= 0) {
        if (auto st = check_prompt_fd(options.prompt_fd); !st) return failed(st.error());
    }
    session::LoginPrompter& prompter = options.prompt_fd >= 0 ? static_cast<session::LoginPrompter&>(channel)
                                                               : terminal;
    auto inputs = login_inputs(options);
    if (!inputs) return failed(inputs.error());
    if (auto st = ask_key_password_if_needed(options, prompter); !st) return failed(st.error());
    auto https = io::HttpsClient::create(https_config(options));
    if (!https) return failed(https.error());

    // 1. A session: from a cookie, or by logging in.
    if (options.cookie_on_stdin || !options.cookie.empty()) {
        Secret text = options.cookie_on_stdin ? Secret() : std::move(options.cookie);
        if (options.cookie_on_stdin) {
            auto line = read_stdin_line("the cookie on standard input");
            if (!line) return failed(line.error());
            text = std::move(*line);
        }
        if (auto rc = protocol.use_cookie(options, text.reveal_text())) return *rc;
    } else if (auto rc = protocol.log_in(options, *https, prompter, *inputs)) {
        return *rc;
    }

    // 2. Print it, or connect.
    const http::Url server = protocol.server();
    const auto peer = https->peer(server.host, server.port);
    if (options.action == Action::authenticate) {
        out << "COOKIE=" << shell_quote(protocol.cookie_text().reveal_text()) << "\n";
        out << "HOST=" << shell_quote(peer ? peer->address : server.host) << "\n";
        out << "CONNECT_URL=" << shell_quote(server.to_string()) << "\n";
        out << "FINGERPRINT=" << shell_quote(peer ? peer->pin : "") << "\n";
        out << "RESOLVE=" << shell_quote(server.host + ":" + (peer ? peer->address : server.host)) << "\n";
    } else if (options.action == Action::cookie_only) {
        out << protocol.cookie_text().reveal_text() << "\n";
    }
    if (options.action == Action::authenticate || options.action == Action::cookie_only) {
        out.flush();
        https->close_all();
        return kExitOk;
    }
    if (options.print_cookie) out << protocol.cookie_text().reveal_text() << std::endl;

    session::TunnelOptions t = tunnel_options(options);
    if (options.kill_switch) t.host.login_servers = login_servers(*https, protocol.login_server());
    if (broker) {
        t.make_host = [broker](const host::TunnelHostOptions& h) -> std::unique_ptr<host::Host> {
            return std::make_unique<host::BrokerHost>(broker, h.login_servers);
        };
        t.udp_socket = [broker](int family, int send_buffer, int receive_buffer) {
            return broker->open_udp(family, send_buffer, receive_buffer);
        };
        t.write_stats = [broker](const std::string& path, std::span<const std::uint8_t> bytes) {
            return broker->write_state(path, {bytes.begin(), bytes.end()}, false, 0644);
        };
    }
    t.after_setup = [&] { return process->drop_privileges(); };
    t.on_connected = [&] { process->tunnel_up(); };
    const int rc = protocol.connect(options, *https, *process, t);
    https->close_all();
    return rc;
}

}  // namespace espvpn::cli
