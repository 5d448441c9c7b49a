// `espvpn --protocol=anyconnect` (the default) in the command outline
// (tunnel_command.h): log in (or take a cookie), then --authenticate / --cookieonly
// output, or a connect: CONNECT, the CSTP tunnel until a signal or the server ends
// it (src/session/anyconnect/tunnel.h).
#pragma once

#include <iosfwd>

#include "src/cli/options.h"

namespace espvpn::cli {

// Returns the process exit code (exit_codes.h), as openconnect's: 2 when the
// server rejected the cookie.
int run_anyconnect(ClientOptions& options, std::ostream& out);

}  // namespace espvpn::cli
