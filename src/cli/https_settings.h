// The HTTPS/TLS settings every protocol's login takes from the command line
// (--cafile, --servercert, --certificate, --resolve, timeouts, keep-alive).
#pragma once

#include "src/cli/options.h"
#include "src/io/https_client.h"

namespace espvpn::cli {

io::HttpsClientConfig https_config(const ClientOptions& options);

}  // namespace espvpn::cli
