// `espvpn --self-check`: what this build and this CPU can do.
#pragma once

#include <iosfwd>

namespace espvpn::cli {

// Prints the report; returns false when something essential is missing.
bool run_self_check(std::ostream& out);

}  // namespace espvpn::cli
