// Runs the user's --csd-wrapper program for either protocol and returns what it
// printed: GlobalProtect's HIP report (openconnect's hipreport.sh contract:
// --cookie C --client-ip IP [--client-ipv6 IP6] --md5 M --client-os OS,
// APP_VERSION in the environment; gp/tunnel_setup.cpp) and AnyConnect's CSD host
// scan (anyconnect/login.cpp). Bounded in time and output size.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn::session {

struct ProgramRun {
    std::string program;
    std::vector<std::string> args;
    std::vector<std::string> extra_env;  // "NAME=value"
    std::string run_as_user;             // empty: as ourselves
    std::chrono::milliseconds timeout{30000};
    std::size_t max_output = 1 << 20;
    int cancel_fd = -1;  // readable: the program is killed, the run ends with an error
};

// stdout of the program if it exits 0 in time; otherwise an error naming why
// (with the end of its stderr).
Result<std::string> run_for_output(const ProgramRun& run);

}  // namespace espvpn::session
