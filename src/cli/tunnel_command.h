// One outline for both protocols' commands (login -> --authenticate printing or
// the tunnel -> exit code), with openconnect's process control (-b, --pid-file,
// --setuid) for both. A protocol supplies its login, its cookie text and its
// connect (gp_command.cpp, anyconnect_command.cpp).
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/http/url.h"
#include "src/cli/login_inputs.h"
#include "src/cli/options.h"
#include "src/cli/process_control.h"
#include "src/cli/terminal_prompter.h"
#include "src/io/https_client.h"
#include "src/session/gp/portal_cookie_cache.h"
#include "src/session/state_files.h"
#include "src/session/tunnel_session.h"

namespace espvpn::cli {

class ProtocolCommand {
public:
    virtual ~ProtocolCommand() = default;
    // The server URL (checked before anything else is done).
    virtual Status parse_target(const ClientOptions& options) = 0;
    // A session from the text of --cookie / --cookie-on-stdin (as --authenticate prints it),
    // or from a login. nullopt when there is one, else the exit code (the error logged).
    virtual std::optional<int> use_cookie(const ClientOptions& options, std::string_view text) = 0;
    // `prompter` asks on the terminal (or reads --passwd-on-stdin); `inputs` are -F and --token-mode.
    virtual std::optional<int> log_in(ClientOptions& options, io::HttpsClient& https, session::LoginPrompter& prompter,
                              const LoginInputs& inputs) = 0;
    // The server the session is on, and its cookie as openconnect prints it.
    virtual http::Url server() const = 0;
    // Where a new login goes (GP: the portal given), for --kill-switch's rules.
    virtual http::Url login_server() const { return server(); }
    virtual Secret cookie_text() const = 0;
    // After log_in() returned 0 with no session: why no tunnel is needed (GP: inside the
    // corporate network, no internal gateway); --authenticate prints it as NO_TUNNEL=.
    virtual std::string no_tunnel_reason() const { return {}; }
    // How long a captive portal's exception through the kill switch lasts, when the server
    // says (GP: the portal config's captive-portal-exception-timeout); 0: not said.
    virtual int captive_exception_timeout_s() const { return 0; }
    // The tunnel (and whatever the protocol does around it); returns the exit code.
    // `process.background()` is called here, before any thread starts.
    virtual int connect(ClientOptions& options, io::HttpsClient& https, ProcessControl& process,
                        session::TunnelOptions& tunnel) = 0;
    // The privilege split's session process: its state files go through the broker from now
    // on (`files` outlives the command), and the portal cookie cache is where root found (and
    // made) it before the split (`cookies`; nullopt: none), not where the session user's would be.
    virtual void use_state_files(session::StateFiles& files, std::optional<session::CookieCacheLocation> cookies) {
        (void)files;
        (void)cookies;
    }
};

// The two protocols' commands: `--protocol=gp` (gp_command.cpp: the portal/gateway login,
// getconfig + HIP, ESP or the HTTPS fallback, logout) and `--protocol=anyconnect`, the
// default (anyconnect_command.cpp: the XML login, CONNECT, DTLS or CSTP until a signal).
// `files`: the state files a session reads and writes (the saved portal cookies, the HOTP
// counter, --stats-json); it outlives the command.
std::unique_ptr<ProtocolCommand> make_gp_command(session::StateFiles& files);
// --forget-cookies [PORTAL]: removes the invoking user's saved GP portal cookies (exit code).
int forget_gp_cookies(const ClientOptions& options, session::StateFiles& files);
std::unique_ptr<ProtocolCommand> make_anyconnect_command();

// Returns the process exit code (exit_codes.h).
int run_tunnel_command(ClientOptions& options, std::ostream& out, ProtocolCommand& protocol,
                       session::StateFiles& files);

// The exit code for a session's end (openconnect's: 2 when the server rejected the
// cookie); the end is logged ("exiting", or with `always_on` a warning: a new login follows).
int exit_code(session::TunnelEnd end, bool always_on = false);

// The host name to report: --local-hostname, else the machine's ("localhost" if it has none).
std::string reported_hostname(const ClientOptions& options);

// openconnect's shell quoting for --authenticate lines: 'text', with ' as '\''.
std::string shell_quote(std::string_view text);

}  // namespace espvpn::cli
