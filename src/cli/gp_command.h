// `espvpn --protocol=gp` in the command outline (tunnel_command.h): log in (or take
// a cookie), then --authenticate / --cookieonly output, or a connect: gateway
// getconfig + HIP, the tunnel (ESP or the HTTPS fallback, src/session/gp/tunnel.h), logout.
#pragma once

#include <iosfwd>

#include "src/cli/options.h"
#include "src/cli/tunnel_command.h"

namespace espvpn::cli {

// Returns the process exit code (exit_codes.h).
int run_globalprotect(ClientOptions& options, std::ostream& out);

}  // namespace espvpn::cli
