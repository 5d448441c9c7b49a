// `espvpn --protocol=gp`: log in (or take a cookie), then --authenticate /
// --cookieonly output, or a connect: gateway getconfig + HIP, then logout
// and, for a connect, the tunnel: ESP or the HTTPS fallback (src/session/gp_tunnel.h).
#pragma once

#include <iosfwd>

#include "src/cli/options.h"

namespace espvpn::cli {

// Returns the process exit code (exit_codes.h).
int run_globalprotect(ClientOptions& options, std::ostream& out);

// openconnect's shell quoting for --authenticate lines: 'text', with ' as '\''.
std::string shell_quote(std::string_view text);

}  // namespace espvpn::cli
