// The vpnc-script environment contract (as openconnect 9.01 sets it): which
// variables a script gets for a TunnelConfig. Pure: no process is started here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::host {

enum class ScriptReason { pre_init, connect, disconnect, attempt_reconnect, reconnect };
std::string_view reason_name(ScriptReason reason);

// Variables to set; a nullopt value means "unset it in the child", so stale
// values inherited from our own environment never reach the script.
using ScriptEnv = std::vector<std::pair<std::string, std::optional<std::string>>>;

struct ScriptContext {
    ScriptReason reason = ScriptReason::connect;
    std::string tun_device;  // empty before the device exists (pre-init without -i)
    int vpn_pid = 0;         // stays the same for the whole run
    int log_level = 1;       // 0 error, 1 info, 2 debug, 3 trace (openconnect's scale)
};

ScriptEnv build_script_env(const TunnelConfig& config, const ScriptContext& context);

// Prefixes of variables the contract owns: inherited ones that we do not set are
// removed from the child's environment.
bool is_contract_variable(std::string_view name);

}  // namespace espvpn::host
