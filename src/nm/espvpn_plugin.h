// The NetworkManager VPN plugin object: an NMVpnServicePlugin (libnm) that answers
// Connect by starting espvpn as a child, and Disconnect by stopping it. espvpn runs
// our helper as its vpnc-script; the helper calls SetConfig/SetIp4Config/SetIp6Config
// on this object, which libnm turns into the Config/Ip4Config/Ip6Config signals.
#pragma once

#include "src/nm/libnm.h"

#include <functional>
#include <string>

namespace espvpn::nm {

struct PluginOptions {
    std::string bus_name;        // the D-Bus name to own (NM passes --bus-name)
    std::string espvpn_binary;   // the espvpn program to start
    std::string helper_command;  // the --script command line espvpn runs
    bool watch_peer = true;      // disconnect when the caller (NM) goes away; quit when idle
    int verbosity = 0;           // -v count passed to espvpn
};

// Environment variable through which the helper learns the service's bus name.
inline constexpr const char* kBusNameVariable = "NM_ESPVPN_SERVICE_BUS_NAME";

// Exports the plugin on the system bus (DBUS_SYSTEM_BUS_ADDRESS, as every GLib
// program) and owns options.bus_name. nullptr with *error set on failure.
NMVpnServicePlugin* create_espvpn_plugin(const PluginOptions& options, GError** error);

// Whether an espvpn child is still running (it may outlive the Disconnect call
// by up to the logout grace period).
bool espvpn_child_running(NMVpnServicePlugin* plugin);

// Called (once per registration) when no child is running any more.
void on_espvpn_child_gone(NMVpnServicePlugin* plugin, std::function<void()> callback);

}  // namespace espvpn::nm
