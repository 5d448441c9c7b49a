// espvpn: the command-line client. Options follow openconnect's names where
// the two overlap.
#include <getopt.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "src/cli/exit_codes.h"
#include "src/cli/self_check.h"
#include "src/log/logger.h"

namespace {

using namespace espvpn;

void print_help() {
    std::cout <<
R"(Usage: espvpn [options] <server>

A userspace VPN client for GlobalProtect (ESP) and AnyConnect (DTLS) gateways.

General:
  -h, --help                 show this help and exit
  -V, --version              print the version and exit
      --self-check           print the crypto library, CPU features and the ESP
                             suites this build supports, then exit

Logging:
  -v, --verbose              more output (repeat for debug, trace)
  -q, --quiet                errors and warnings only
      --timestamp            prefix each line with a timestamp
      --syslog               log to syslog instead of stderr

Exit codes: 0 success or user disconnect, 1 error, 2 cookie/credentials rejected.
)";
}

}  // namespace

int main(int argc, char** argv) {
    enum { kSelfCheck = 1000, kTimestamp, kSyslog };
    static const option long_opts[] = {
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, 'V'},
        {"self-check", no_argument, nullptr, kSelfCheck},
        {"verbose", no_argument, nullptr, 'v'},
        {"quiet", no_argument, nullptr, 'q'},
        {"timestamp", no_argument, nullptr, kTimestamp},
        {"syslog", no_argument, nullptr, kSyslog},
        {nullptr, 0, nullptr, 0},
    };
    log::Config log_config;
    int verbosity = static_cast<int>(log::Level::info);
    bool self_check = false;
    int c;
    while ((c = getopt_long(argc, argv, "hVvq", long_opts, nullptr)) != -1) {
        switch (c) {
            case 'h': print_help(); return cli::kExitOk;
            case 'V': std::cout << "espvpn " << ESPVPN_VERSION << "\n"; return cli::kExitOk;
            case kSelfCheck: self_check = true; break;
            case 'v': verbosity = std::min(verbosity + 1, static_cast<int>(log::Level::trace)); break;
            case 'q': verbosity = static_cast<int>(log::Level::warn); break;
            case kTimestamp: log_config.timestamps = true; break;
            case kSyslog: log_config.syslog = true; break;
            default:
                std::cerr << "Run 'espvpn --help' for the list of options.\n";
                return cli::kExitError;
        }
    }
    log_config.level = static_cast<log::Level>(verbosity);
    log::configure(log_config);

    if (self_check) return cli::run_self_check(std::cout) ? cli::kExitOk : cli::kExitError;

    if (optind >= argc) {
        std::cerr << "espvpn: no server given. Run 'espvpn --help' for usage.\n";
        return cli::kExitError;
    }
    LOG_ERROR << "connecting is not built yet in this version";
    return cli::kExitError;
}
