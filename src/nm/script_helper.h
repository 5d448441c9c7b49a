// `nm-espvpn-service --helper`: the vpnc-script espvpn runs under the plugin. At
// "connect" it turns its environment into NM's configuration (nm_vpn_config.h) and
// calls SetConfig / SetIp4Config / SetIp6Config on the service that started espvpn
// (name from NM_ESPVPN_SERVICE_BUS_NAME), or SetFailure when the values are unusable.
// Other reasons are no-ops: NetworkManager keeps the first configuration.
#pragma once

namespace espvpn::nm {

// Returns the process exit status.
int run_script_helper(char** environment);

}  // namespace espvpn::nm
