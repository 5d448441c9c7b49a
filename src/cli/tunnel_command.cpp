#include "src/cli/tunnel_command.h"

#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <ostream>

#include "src/cli/exit_codes.h"
#include "src/cli/channel_prompter.h"
#include "src/cli/https_settings.h"
#include "src/cli/privilege_split.h"
#include "src/cli/status_command.h"
#include "src/cli/terminal_prompter.h"
#include "src/io/route_watch.h"
#include "src/log/logger.h"
#include "src/session/gp/portal_cookie_cache.h"
#include "src/session/signal_watch.h"
#include "src/session/captive_portal.h"
#include "src/session/trusted_network.h"
#include "src/io/tls_stream.h"
#include "src/sso/browser_launcher.h"
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
    t.always_on = o.always_on;
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

// --always-on: whether a login failed because it needed a person who was not there (a
// prompt that got no answer), which makes the state needs-login instead of reconnecting.
class RecordingPrompter final : public session::LoginPrompter {
public:
    explicit RecordingPrompter(session::LoginPrompter& inner) : p_(inner) {}
    bool unanswered() const { return unanswered_; }
    Result<std::string> ask_text(std::string_view prompt) override { return note(p_.ask_text(prompt)); }
    Result<Secret> ask_secret(std::string_view prompt) override { return note(p_.ask_secret(prompt)); }
    Result<Secret> ask_pin(std::string_view prompt) override { return note(p_.ask_pin(prompt)); }
    Result<std::string> ask_choice(std::string_view label, const std::vector<std::string>& choices) override {
        return note(p_.ask_choice(label, choices));
    }
    void show(std::string_view message) override { p_.show(message); }
    Result<Secret> ask_field(const session::LoginField& field) override { return note(p_.ask_field(field)); }
    Result<std::string> ask_select(const session::LoginField& field) override { return note(p_.ask_select(field)); }
    Status accept_banner(std::string_view text) override { return note(p_.accept_banner(text)); }
    void form_message(std::string_view text, bool error) override { p_.form_message(text, error); }
    bool offers_defaults() const override { return p_.offers_defaults(); }

private:
    template <class R>
    R note(R r) {
        if (!r) unanswered_ = true;
        return r;
    }
    session::LoginPrompter& p_;
    bool unanswered_ = false;
};

// --always-on between two sessions (or login attempts): waits `delay` (none: until told),
// a route change (when `delay` is given or `watch_routes`), a reconnect request or SIGUSR2
// ends the wait (true); a disconnect request, SIGINT, SIGTERM or SIGHUP end the program (false).
bool wait_to_retry(StatusService* status, std::optional<std::chrono::seconds> delay, bool watch_routes = false) {
    session::SignalWatch signals;
    std::optional<io::RouteWatch> routes;
    if (delay || watch_routes) {
        if (auto w = io::RouteWatch::open()) routes.emplace(std::move(*w));
    }
    const auto end = std::chrono::steady_clock::now() + delay.value_or(std::chrono::seconds(0));
    for (;;) {
        pollfd p[3] = {{signals.fd(), POLLIN, 0},
                       {status ? status->server->commands_fd() : -1, POLLIN, 0},
                       {routes ? routes->fd() : -1, POLLIN, 0}};
        int timeout = -1;
        if (delay) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) return true;
            timeout = static_cast<int>(left.count()) + 1;
        }
        ::poll(p, 3, timeout);
        for (int sig; (sig = signals.next()) != 0;) {
            if (sig == SIGUSR2) return true;
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
                LOG_INFO << "signal " << sig << " while waiting to connect: exiting";
                return false;
            }
        }
        if (status && (p[1].revents & POLLIN))
            for (status::Request r : status->server->take_commands()) {
                if (r == status::Request::disconnect) {
                    LOG_INFO << "disconnect requested on the status socket: exiting";
                    return false;
                }
                if (r == status::Request::reconnect) {
                    LOG_INFO << "reconnect requested on the status socket: trying now";
                    return true;
                }
            }
        if (routes && (p[2].revents & POLLIN) && routes->drain() > 0) {
            LOG_INFO << "the routes changed: " << (watch_routes ? "checking the network again" : "trying now");
            return true;
        }
    }
}

// --trusted-domain/--trusted-server: the rules (already checked by the option parser).
session::TrustedRules trusted_rules(const ClientOptions& o) {
    session::TrustedRules rules;
    rules.domains = o.trusted_domains;
    for (const auto& text : o.trusted_servers)
        if (auto s = session::parse_trusted_server(text)) rules.servers.push_back(std::move(*s));
    return rules;
}

// How often a trusted network is checked again without a route change (a DHCP client may
// rewrite /etc/resolv.conf after the routes, or a --trusted-server go away on the same link).
constexpr std::chrono::seconds kTrustedRecheck{30};

// --captive-probe / --no-captive-probe (checked by the option parser): nullopt = never probe.
std::optional<captive::ProbeSpec> captive_probe_spec(const ClientOptions& o) {
    if (o.no_captive_probe) return std::nullopt;
    if (o.captive_probe.empty()) return captive::default_probe_spec();
    auto s = captive::parse_probe_spec(o.captive_probe);
    if (!s) return std::nullopt;
    return std::move(*s);
}

// Whether this process runs under a seccomp filter (/proc/self/status "Seccomp: 2"): a
// browser started from it would inherit the filter, which its own sandbox cannot live with.
bool under_seccomp_filter() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
    return false;
}

// The portal's page (printable already) on stderr for the user to open, and in the user's
// browser: through the browser launcher when the session has one (forked before its seccomp
// filter: src/sso/browser_launcher.h), else as the invoking user when there is a display or
// --external-browser and no seccomp filter is in the way.
void show_portal(const ClientOptions& o, const std::string& url) {
    const std::string msg = "A captive portal stands before the VPN gateway. Log in to it in a browser:\n  " + url + "\n";
    std::fputs(msg.c_str(), stderr);
    std::fflush(stderr);
    if (sso::has_browser_launcher()) {
        if (Status st = sso::launch_browser(url); !st) LOG_WARN << "captive portal: " << st.error().message;
        else LOG_INFO << "captive portal: its page opened by the browser launcher";
        return;
    }
    if (under_seccomp_filter()) return;
    auto user = sso::invoking_user();
    if (!user) return;
    std::string program = o.external_program;
    if (program.empty()) {
        if (!user->has_display() || user->is_root_alone) return;
        program = "xdg-open";
    }
    if (auto st = sso::start_as_user(*user, program, url); !st) LOG_WARN << "captive portal: " << st.error().message;
    else LOG_INFO << "captive portal: its page opened in " << program << " as " << user->name;
}

// Whether TCP to the login server fails (refused, unreachable, no answer within 3 s): only
// then is a failed login worth a captive-portal probe.
bool login_server_unreachable(const http::Url& server) {
    auto fd = io::tcp_connect(server.host, server.port, std::chrono::seconds(3));
    if (!fd) return true;
    ::close(*fd);
    return false;
}

// A captive portal was found (`verdict`): say so, show its page, open the kill switch's exception
// when the broker holds the kill switch for it, and probe again (2, 4 ... 30 s apart; at once on a
// route change or `espvpn reconnect`) until the portal lets traffic through (nullopt: connect
// now). Else the exit code: 0 for a disconnect or a signal, 1 when, without --always-on,
// --reconnect-timeout is used up.
std::optional<int> wait_out_captive_portal(const ClientOptions& o, StatusService* status, const captive::ProbeSpec& probe,
                             captive::Verdict verdict, host::BrokerChannel* held_kill_switch, int exception_s,
                             std::vector<std::string> addresses = {}) {
    session::StatusBoard* board = status ? &status->board : nullptr;
    // Past the held kill switch (to port 80), also once its exception has closed.
    host::BrokerChannel* const marks = held_kill_switch;
    // The probe host's addresses: the session's (from the tunnel's DNS), else looked up once
    // here (a name server that does not answer costs its timeout, and the kill switch may
    // block DNS once the exception has closed).
    auto probe_now = [&] {
        io::ProbeRoute route;
        if (addresses.empty()) {
            if (auto found = io::resolve_probe_host(probe.url.host); found) addresses = *found;
        }
        route.addresses = addresses;
        if (marks) {
            for (int family : {AF_INET, AF_INET6}) {
                auto fd = marks->open_probe_socket(family);
                if (fd) (family == AF_INET ? route.v4 : route.v6) = std::move(*fd);
            }
        }
        captive::Verdict v = session::probe_for_captive_portal(probe, -1, std::move(route));
        LOG_DEBUG << "captive-portal probe " << probe.url.text() << ": " << v.why;
        return v;
    };
    const auto began = std::chrono::steady_clock::now();
    std::chrono::seconds wait{2};
    std::string shown;
    for (;;) {
        if (verdict.kind == captive::Verdict::Kind::online) {
            LOG_INFO << "captive portal: the probe gets the expected answer now: connecting";
            return std::nullopt;
        }
        if (verdict.kind == captive::Verdict::Kind::portal && verdict.portal_url != shown) {
            shown = verdict.portal_url;
            LOG_WARN << "captive portal (" << verdict.why << "): log in at " << shown;
            if (board) {
                board->set_state(status::State::captive_portal, "captive portal (" + verdict.why + ")");
                board->set_portal(shown);
            }
            show_portal(o, shown);
            if (held_kill_switch) {
                auto opened = held_kill_switch->open_captive_exception(exception_s);
                if (!opened) LOG_WARN << "captive portal: no exception in the kill switch: " << opened.error().message;
                held_kill_switch = nullptr;  // once per portal
            }
        } else if (verdict.kind == captive::Verdict::Kind::unknown) {
            LOG_INFO << "captive portal: the probe got no verdict (" << verdict.why << "): trying the gateway";
            return std::nullopt;
        }
        if (!o.always_on && std::chrono::steady_clock::now() - began > std::chrono::seconds(o.reconnect_timeout_s)) {
            LOG_ERROR << "captive portal: still in the way after --reconnect-timeout " << o.reconnect_timeout_s << " s";
            return kExitError;
        }
        if (!wait_to_retry(status, wait)) return kExitOk;
        wait = std::min(wait * 2, std::chrono::seconds(30));
        verdict = probe_now();
    }
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

int exit_code(session::TunnelEnd end, bool always_on) {
    switch (end) {
        case session::TunnelEnd::user_logout: return kExitOk;
        case session::TunnelEnd::user_detach:
            LOG_INFO << "disconnected; the session stays valid (SIGHUP)";
            return kExitOk;
        case session::TunnelEnd::captive_portal: return kExitError;  // the caller waits for the portal
        case session::TunnelEnd::cookie_rejected:
            if (always_on) LOG_WARN << "the server rejected the cookie: the session is over";
            else LOG_ERROR << "the server rejected the cookie; exiting";
            return kExitCookieRejected;
        default:
            if (always_on) LOG_WARN << session::describe(end) << ": the session is over";
            else LOG_ERROR << session::describe(end) << "; exiting";
            return kExitError;
    }
}

namespace {
int run_session(ClientOptions& options, std::ostream& out, ProtocolCommand& protocol, io::HttpsClient& https,
                ProcessControl& process, StatusService* service, session::StateFiles& files,
                const std::shared_ptr<host::BrokerChannel>& broker, const std::optional<captive::ProbeSpec>& probe,
                session::TunnelOptions::CaptiveFound* portal, const session::TrustedRules& trusted_up,
                std::string* trusted_found);
}  // namespace

int run_tunnel_command(ClientOptions& options, std::ostream& out, ProtocolCommand& protocol,
                       session::StateFiles& files) {
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
    // The portal cookie cache: made and checked here, as root, where the invoking user's is;
    // the session (another user, e.g. nobody when root runs espvpn itself) is told where.
    std::optional<session::CookieCacheLocation> cookies;
    if (auto user = sso::invoking_user();
        user && !options.no_cookie_cache && options.protocol == Protocol::gp && geteuid() == 0) {
        session::PortalCookieCache cache(session::cookie_cache_location(user->uid, user->gid, user->home,
                                                                        user->is_root_alone, std::getenv("XDG_STATE_HOME")),
                                         files);
        if (auto prepared = cache.prepare(); !prepared) {
            LOG_WARN << "no saved portal cookies: " << prepared.error().message;
        } else {
            broker_options.state_dir = prepared->path();
            cookies = std::move(*prepared);
        }
    }
    // The status socket is bound here (as root: /run/espvpn is root's); its server runs in
    // the session process (below), which serves its own user and root.
    auto status = open_status_service(options);
    if (!status) return failed(status.error());
    auto split = split_privileges(options, *process, std::move(broker_options));
    if (!split) return failed(split.error());
    if (const int* broker_exit = std::get_if<int>(&*split)) {
        // The broker: the listener is the session's; the socket file is removed here, as root.
        if (*status) (*status)->listener.reset();
        return *broker_exit;
    }
    const std::shared_ptr<host::BrokerChannel> broker = std::get<SessionSide>(*split).broker;
    // The session's state files: through the broker when there is one (it writes root's and
    // the invoker's files as their owner; the session user may not), else in this process.
    std::optional<host::BrokerStateFiles> broker_files;
    if (broker) broker_files.emplace(broker);
    session::StateFiles& state_files = broker_files ? static_cast<session::StateFiles&>(*broker_files) : files;
    if (broker) protocol.use_state_files(state_files, std::move(cookies));
    TerminalPrompter terminal(options.non_interactive, options.no_passwd, options.passwd_on_stdin);
    ChannelPrompter channel(options.prompt_fd, options.no_passwd);
    if (options.prompt_fd >= 0) {
        if (auto st = check_prompt_fd(options.prompt_fd); !st) return failed(st.error());
    }
    session::LoginPrompter& prompter = options.prompt_fd >= 0 ? static_cast<session::LoginPrompter&>(channel)
                                                               : terminal;
    auto inputs = login_inputs(options, state_files);
    if (!inputs) return failed(inputs.error());
    if (auto st = ask_key_password_if_needed(options, prompter); !st) return failed(st.error());
    if (auto st = ask_mca_pin_if_needed(options, prompter); !st) return failed(st.error());
    auto https = io::HttpsClient::create(https_config(options));
    if (!https) return failed(https.error());
    // The status socket serves from here on (the login's state is "connecting").
    StatusService* const service = status->get();
    if (service) {
        if (auto st = service->start(); !st) return failed(st.error());
    }
    session::StatusBoard* const board = service ? &service->board : nullptr;

    // --always-on: a failed login or an ended session is tried again (1, 2, 4 ... 60 s
    // apart; at once on a route change or `espvpn reconnect`), a login that needs a person
    // waits for `espvpn reconnect`. Without it, the first outcome is the exit code.
    Secret given_cookie = std::move(options.cookie);
    std::chrono::seconds backoff{1};
    // --always-on on a trusted network: no tunnel; checked again on every route change.
    const session::TrustedRules trusted = trusted_rules(options);
    if (!trusted.empty() && !options.always_on)
        LOG_INFO << "--trusted-domain/--trusted-server are used with --always-on only: connecting";
    std::string trusted_said;  // the last verdict logged (one line when it changes)
    // While connected only --trusted-server is asked (around the tunnel, on a change of the
    // host's network): a search domain cannot be read soundly then (docs/SERVICE.md).
    session::TrustedRules trusted_up;
    if (options.always_on && options.action == Action::connect && !options.dry_run && trusted.domains.empty())
        trusted_up.servers = trusted.servers;
    else if (options.always_on && !trusted.servers.empty() && !trusted.domains.empty())
        LOG_INFO << "--trusted-server with --trusted-domain: checked between sessions only (a search domain cannot be "
                    "read while the tunnel's DNS is in place)";
    // Captive portals: the probe; after a session ended for one, its cookie is used again
    // (no new login) and the broker holds the kill switch until the next bring-up.
    const std::optional<captive::ProbeSpec> probe = options.action == Action::connect && !options.dry_run
                                                        ? captive_probe_spec(options)
                                                        : std::nullopt;
    bool resume_session = false;
    for (;;) {
        if (options.always_on && !trusted.empty()) {
            const auto verdict = session::detect_trusted_network(trusted);
            if (verdict.reason != trusted_said) {
                LOG_INFO << verdict.reason << (verdict.trusted ? ": no tunnel (--always-on)" : ": connecting");
                trusted_said = verdict.reason;
            }
            if (verdict.trusted) {
                if (board) board->set_state(status::State::trusted_network);
                if (!wait_to_retry(service, kTrustedRecheck, true)) return kExitOk;
                continue;
            }
        }
        if (board) board->set_state(status::State::connecting);
        RecordingPrompter recording(prompter);
        std::optional<int> login_rc;
        if (options.cookie_on_stdin) {
            auto line = read_stdin_line("the cookie on standard input");
            if (!line) return failed(line.error());
            login_rc = protocol.use_cookie(options, line->reveal_text());
        } else if (resume_session) {
            LOG_INFO << "the session from before the captive portal is used again";
            resume_session = false;
        } else if (!given_cookie.empty()) {
            login_rc = protocol.use_cookie(options, given_cookie.reveal_text());
        } else {
            login_rc = protocol.log_in(options, *https, recording, *inputs);
        }
        // No COOKIE then; a script (or the NetworkManager auth dialog) reads why.
        if (login_rc && *login_rc == kExitOk && options.action == Action::authenticate &&
            !protocol.no_tunnel_reason().empty())
            out << "NO_TUNNEL=" << shell_quote(protocol.no_tunnel_reason()) << "\n";
        if (login_rc && !options.always_on) return *login_rc;
        if (login_rc && *login_rc == kExitOk && !protocol.no_tunnel_reason().empty() &&
            options.action == Action::connect) {
            // GlobalProtect's internal host detection: inside, with no internal gateway.
            https->close_all();
            LOG_INFO << "trusted network (GlobalProtect internal host detection): no tunnel (--always-on) until "
                        "the routes change";
            if (board) board->set_state(status::State::trusted_network);
            if (!wait_to_retry(service, std::chrono::seconds(300), true)) return kExitOk;
            backoff = std::chrono::seconds(1);
            continue;
        }
        if (login_rc) {
            https->close_all();
            if (recording.unanswered()) {
                LOG_WARN << "needs-login: the login asked for something nobody answered (no terminal); waiting: "
                            "'espvpn reconnect' tries again";
                if (board) board->set_state(status::State::needs_login, "a new login is needed");
                if (!wait_to_retry(service, std::nullopt)) return kExitOk;
                backoff = std::chrono::seconds(1);
            } else if (probe && options.proxy.empty() && !options.libproxy &&
                       login_server_unreachable(protocol.login_server())) {
                // The gateway cannot be reached: a captive portal in the way?
                captive::Verdict v = session::probe_for_captive_portal(*probe);
                if (v.kind == captive::Verdict::Kind::portal) {
                    if (auto rc = wait_out_captive_portal(options, service, *probe, std::move(v), nullptr, 0)) return *rc;
                    backoff = std::chrono::seconds(1);
                    continue;
                }
                LOG_WARN << "the login failed (no captive portal: " << v.why << "); trying again in " << backoff.count()
                         << " s (--always-on)";
                if (board) board->set_state(status::State::reconnecting, "the login failed (see the log)");
                if (!wait_to_retry(service, backoff)) return kExitOk;
                backoff = std::min(backoff * 2, std::chrono::seconds(60));
            } else {
                LOG_WARN << "the login failed; trying again in " << backoff.count() << " s (--always-on)";
                if (board) board->set_state(status::State::reconnecting, "the login failed (see the log)");
                if (!wait_to_retry(service, backoff)) return kExitOk;
                backoff = std::min(backoff * 2, std::chrono::seconds(60));
            }
            continue;
        }
        const auto began = std::chrono::steady_clock::now();
        session::TunnelOptions::CaptiveFound portal;
        std::string trusted_found;
        const int rc = run_session(options, out, protocol, *https, *process, service, state_files, broker, probe, &portal,
                                   trusted_up, &trusted_found);
        if (!trusted_found.empty() && rc == kExitOk) {
            // Arrived on a trusted network while connected: logged out; off until it is left.
            if (board) board->set_state(status::State::trusted_network);
            backoff = std::chrono::seconds(1);
            continue;
        }
        if (!portal.url.empty() && probe) {
            // The session ended for a captive portal (its cookie still good): wait it out, then
            // the same session again.
            const int seconds = options.captive_exception_timeout_s > 0 ? options.captive_exception_timeout_s
                                : protocol.captive_exception_timeout_s() > 0 ? protocol.captive_exception_timeout_s()
                                                                               : 300;
            captive::Verdict v;
            v.kind = captive::Verdict::Kind::portal;
            v.portal_url = portal.url;
            v.why = "found after a reconnect attempt failed";
            host::BrokerChannel* held = options.kill_switch && broker ? broker.get() : nullptr;
            if (auto code = wait_out_captive_portal(options, service, *probe, std::move(v), held, seconds,
                                                    std::move(portal.probe_addresses)))
                return *code;
            resume_session = true;
            backoff = std::chrono::seconds(1);
            continue;
        }
        if (!options.always_on || rc == kExitOk || options.action != Action::connect) return rc;
        // A session that ran a while: the next one starts from the shortest wait again.
        if (std::chrono::steady_clock::now() - began > std::chrono::seconds(60)) backoff = std::chrono::seconds(1);
        // The session ended on an error or a rejected cookie: a new login (the saved portal
        // cookie, where there is one, makes it without a person).
        if (board) board->set_state(status::State::reconnecting);
        LOG_WARN << "the session ended (exit code " << rc << "); logging in again in " << backoff.count()
                 << " s (--always-on)";
        if (!wait_to_retry(service, backoff)) return kExitOk;
        backoff = std::min(backoff * 2, std::chrono::seconds(60));
    }
}

namespace {

// One session: print it (--authenticate, --cookieonly), or run the tunnel; the exit code.
int run_session(ClientOptions& options, std::ostream& out, ProtocolCommand& protocol, io::HttpsClient& https_client,
                ProcessControl& process_control, StatusService* service, session::StateFiles& files,
                const std::shared_ptr<host::BrokerChannel>& broker, const std::optional<captive::ProbeSpec>& probe,
                session::TunnelOptions::CaptiveFound* portal, const session::TrustedRules& trusted_up,
                std::string* trusted_found) {
    io::HttpsClient* const https = &https_client;
    ProcessControl* const process = &process_control;

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
    t.state_files = &files;
    if (service) {
        service->board.set_gateway(server.host + (server.port == 443 ? std::string() : ":" + std::to_string(server.port)));
        t.status_board = &service->board;
        t.status_server = service->server.get();
    }
    if (options.kill_switch) {
        t.host.login_servers = login_servers(*https, protocol.login_server());
        // The trusted servers, asked around the tunnel while it is up: TCP to their port only.
        for (const session::TrustedServer& s : trusted_up.servers) {
            auto found = io::resolve_probe_host(s.host);
            if (!found) {
                LOG_WARN << "--trusted-server " << s.host << ": " << found.error().message
                         << ": --kill-switch blocks its check while connected";
                continue;
            }
            for (std::string& a : *found) t.host.login_servers.push_back({std::move(a), s.port});
        }
    }
    if (broker) {
        t.make_host = [broker](const host::TunnelHostOptions& h) -> std::unique_ptr<host::Host> {
            return std::make_unique<host::BrokerHost>(broker, h.login_servers);
        };
        t.udp_socket = [broker](int family, int send_buffer, int receive_buffer) {
            return broker->open_udp(family, send_buffer, receive_buffer);
        };
    }
    t.captive_probe = probe;
    t.captive_portal = portal;
    t.trusted_while_up = trusted_up;
    t.trusted_found = trusted_found;
    t.after_setup = [&] { return process->drop_privileges(); };
    t.on_connected = [&] { process->tunnel_up(); };
    const int rc = protocol.connect(options, *https, *process, t);
    https->close_all();
    return rc;
}

}  // namespace

}  // namespace espvpn::cli
