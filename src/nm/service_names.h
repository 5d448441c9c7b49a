// Names the NetworkManager service and its auth dialog share.
#pragma once

namespace espvpn::nm {

// The D-Bus name NetworkManager knows the plugin by (the .name file's service=).
inline constexpr const char* kServiceBusName = "org.freedesktop.NetworkManager.espvpn";

// The espvpn binary both programs run unless told otherwise; the build sets it
// from the install prefix (src/nm/CMakeLists.txt).
inline constexpr const char* kDefaultEspvpnBinary = ESPVPN_NM_DEFAULT_BINARY;

}  // namespace espvpn::nm
