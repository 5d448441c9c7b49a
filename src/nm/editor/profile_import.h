// Import and export of espvpn VPN profiles (the editor plugin's import_from_file /
// export_to_file, so nm-connection-editor's Import/Export and `nmcli connection import
// type espvpn file F`). Reads
//   - a NetworkManager keyfile (.nmconnection) of an espvpn or a NetworkManager-openconnect
//     VPN ([vpn] service-type=...espvpn / ...openconnect, [vpn-secrets]);
//   - NetworkManager-openconnect's export ([openconnect] Host=, Protocol=, ...);
//   - an openconnect (or espvpn) --config file: one long option per line, "name=value",
//     "name value" or "name", # comments; the server as "server=URL".
// A NetworkManager-openconnect profile becomes an espvpn one: protocol gp / anyconnect,
// its items under the names espvpn's service reads, the soft token's secret and flags.
// Export writes the keyfile form without secrets (only their flags), which import reads back.
// Pure (GLib's GKeyFile only); unit-tested in tests/unit/src/nm/test_profile_import.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/nm/editor/profile_fields.h"

namespace espvpn::nm::editor {

inline constexpr const char* kServiceType = "org.freedesktop.NetworkManager.espvpn";
inline constexpr const char* kOpenconnectServiceType = "org.freedesktop.NetworkManager.openconnect";

struct Profile {
    std::string name;  // connection.id ("" = none given)
    VpnItems items;
    std::vector<std::string> left_out;  // what the source had that espvpn's profile cannot carry
};

// `text`: the file's content. Returns false with `error` saying why (nothing in `out`
// is then meaningful).
bool import_profile(std::string_view text, Profile& out, std::string& error);

// A NetworkManager-openconnect VPN setting as an espvpn one; false when its protocol is
// not one espvpn speaks.
bool from_openconnect(const VpnItems& oc, Profile& out, std::string& error);

// The keyfile form; secrets are not written (their "-flags" items are).
std::string export_profile(const Profile& profile);

}  // namespace espvpn::nm::editor
