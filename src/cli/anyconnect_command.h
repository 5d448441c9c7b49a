// `espvpn --protocol=anyconnect` (the default) in the command outline
// (tunnel_command.h): log in (or take a cookie), then --authenticate / --cookieonly
// output, or a connect: CONNECT, the CSTP tunnel until a signal or the server ends
// it (src/session/anyconnect/tunnel.h).
#pragma once

#include <memory>

#include "src/cli/tunnel_command.h"

namespace espvpn::cli {

// Its commands for run_tunnel_command() (tunnel_command.h).
std::unique_ptr<ProtocolCommand> make_anyconnect_command();

}  // namespace espvpn::cli
