// espvpn: the command-line client. Options follow openconnect's names where
// the two overlap (src/cli/options.h).
#include <sys/prctl.h>

#include <cstring>
#include <iostream>

#include "src/cli/exit_codes.h"
#include "src/cli/https_settings.h"
#include "src/cli/options.h"
#include "src/cli/self_check.h"
#include "src/cli/status_command.h"
#include "src/cli/tunnel_command.h"
#include "src/session/state_files.h"
#include "src/log/logger.h"
#include "src/sso/callback_socket.h"

namespace {

void secret_lock_refused(int error) {
    LOG_DEBUG << "secrets: mlock refused (" << std::strerror(error)
              << "): their pages stay out of core dumps but may be swapped (RLIMIT_MEMLOCK is too low)";
}

}  // namespace

int main(int argc, char** argv) {
    using namespace espvpn;
    // `espvpn status|disconnect|reconnect`: a client of a running session's status socket.
    if (cli::is_status_subcommand(argc, argv)) return cli::run_status_subcommand(argc, argv, std::cout, std::cerr);
    // The process holds passwords, cookies and keys: no core dump, and no other user
    // may ptrace it or read its /proc files (they become root's).
    (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    set_secret_lock_refused_hook(secret_lock_refused);
    auto parsed = cli::parse_options(argc, argv);
    if (!parsed) {
        std::cerr << "espvpn: " << parsed.error().message << "\n"
                  << "Run 'espvpn --help' for the list of options.\n";
        return cli::kExitError;
    }
    cli::ClientOptions& options = *parsed;

    log::Config log_config;
    // openconnect's scale (0 quiet, 1 info, 2 debug, 3 trace) onto ours.
    static const log::Level levels[] = {log::Level::warn, log::Level::info, log::Level::debug,
                                        log::Level::trace};
    log_config.level = levels[options.verbosity];
    log_config.timestamps = options.timestamp;
    log_config.syslog = options.syslog;
    log::configure(log_config);

    // The files a session keeps (the saved portal cookies, the HOTP counter, --stats-json),
    // opened by this process.
    session::LocalStateFiles state_files;
    switch (options.action) {
        case cli::Action::help: std::cout << cli::usage_text(); return cli::kExitOk;
        case cli::Action::version: cli::print_version(std::cout); return cli::kExitOk;
        case cli::Action::self_check:
            return cli::run_self_check(std::cout) ? cli::kExitOk : cli::kExitError;
        case cli::Action::sso_callback:
            // The globalprotectcallback: handler (data/espvpn-sso-callback.desktop).
            if (auto st = sso::send_callback(options.sso_callback.reveal_text()); !st) {
                std::cerr << "espvpn: " << st.error().message << "\n";
                return cli::kExitError;
            }
            return cli::kExitOk;
        case cli::Action::forget_cookies: return cli::forget_gp_cookies(options, state_files);
        default: break;
    }
    if (auto st = cli::prepare_compat_options(options); !st) {
        LOG_ERROR << st.error().message;
        return cli::kExitError;
    }
    auto command =
        options.protocol == cli::Protocol::gp ? cli::make_gp_command(state_files) : cli::make_anyconnect_command();
    return cli::run_tunnel_command(options, std::cout, *command, state_files);
}
