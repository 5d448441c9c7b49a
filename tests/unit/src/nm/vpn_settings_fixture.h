// A VpnSettings from plain maps (the secrets wrapped as Secret), for the nm unit tests.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "src/nm/espvpn_command.h"

namespace espvpn::nm {

inline VpnSettings settings(std::map<std::string, std::string> data, std::map<std::string, std::string> secrets) {
    VpnSettings s;
    s.data = std::move(data);
    for (auto& [k, v] : secrets) s.secrets[k] = Secret::from_string(v);
    return s;
}

}  // namespace espvpn::nm
