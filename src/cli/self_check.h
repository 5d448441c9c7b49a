// `espvpn --self-check`: what this build and this CPU can do.
#pragma once

#include <iosfwd>

namespace espvpn::cli {

// `espvpn --version`: the version, libraries, protocols, ESP and DTLS ciphers and
// what is built in, as openconnect --version lists them.
void print_version(std::ostream& out);

// Prints the report; returns false when something essential is missing.
bool run_self_check(std::ostream& out);

}  // namespace espvpn::cli
