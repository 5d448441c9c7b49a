// `espvpn --protocol=gp` in the command outline (tunnel_command.h): log in (or take
// a cookie), then --authenticate / --cookieonly output, or a connect: gateway
// getconfig + HIP, the tunnel (ESP or the HTTPS fallback, src/session/gp/tunnel.h), logout.
#pragma once

#include <memory>

#include "src/cli/tunnel_command.h"

namespace espvpn::cli {

// Its commands for run_tunnel_command() (tunnel_command.h).
std::unique_ptr<ProtocolCommand> make_gp_command();

}  // namespace espvpn::cli
