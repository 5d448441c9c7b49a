// Runs a user's HIP report program (--csd-wrapper, openconnect's contract:
// hipreport.sh --cookie C --client-ip IP [--client-ipv6 IP6] --md5 M
// --client-os OS, APP_VERSION in the environment) and returns what it printed.
// Bounded in time and output size; the cookie passed carries no authcookie.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "crypto/result.h"

namespace espvpn::session {

struct ProgramRun {
    std::string program;
    std::vector<std::string> args;
    std::vector<std::string> extra_env;  // "NAME=value"
    std::string run_as_user;             // empty: as ourselves
    std::chrono::milliseconds timeout{30000};
    std::size_t max_output = 1 << 20;
};

// stdout of the program if it exits 0 in time; otherwise an error naming why
// (with the end of its stderr).
Result<std::string> run_for_output(const ProgramRun& run);

}  // namespace espvpn::session
