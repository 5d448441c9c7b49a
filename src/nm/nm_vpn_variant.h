// NmVpnConfig as the a{sv} dictionaries of the org.freedesktop.NetworkManager.VPN.Plugin
// SetConfig / SetIp4Config / SetIp6Config calls (key names and types of libnm's
// nm-vpn-dbus-interface.h). Each function returns a floating GVariant.
#pragma once

#include <glib.h>

#include "src/nm/nm_vpn_config.h"

namespace espvpn::nm {

GVariant* generic_config_variant(const NmGenericConfig& config);
GVariant* ip4_config_variant(const NmIp4Config& config);
GVariant* ip6_config_variant(const NmIp6Config& config);

}  // namespace espvpn::nm
