// Process exit codes, the same as openconnect's so scripts and NetworkManager
// read them alike.
#pragma once

namespace espvpn::cli {

enum ExitCode : int {
    kExitOk = 0,              // success, or the user asked to disconnect
    kExitError = 1,           // any error (bad usage, connection failure, ...)
    kExitCookieRejected = 2,  // the server rejected the cookie / credentials
};

}  // namespace espvpn::cli
