// How the plugin service starts espvpn for a NetworkManager VPN connection: the
// argv built from the connection's vpn.data items and the secret written to the
// child's stdin. Pure (no process is started), so the mapping and the rule "no
// secret in argv" are unit-tested.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::nm {

// vpn.data items and vpn.secrets of one connection profile.
struct VpnSettings {
    std::map<std::string, std::string> data;
    std::map<std::string, Secret> secrets;
};

struct EspvpnCommand {
    std::vector<std::string> argv;  // never holds a secret
    Secret stdin_line;              // the cookie, or the password (then "\n" + the one-time code
                                    // of an otp=yes profile); without the final newline
    std::vector<std::string> ignored_keys;  // unknown vpn.data items (logged, not fatal)
    Secret token_secret;  // when not empty: the soft token's key, for espvpn's fd kTokenFd
};

// The descriptor espvpn reads a soft token's key from (--token-secret=@/dev/fd/3):
// the service hands it a pipe holding EspvpnCommand::token_secret.
inline constexpr int kTokenFd = 3;

// The secrets a connection needs: a "cookie" (as `espvpn --authenticate` prints
// it) or a "password". Returns false when neither is present.
bool has_login_secret(const VpnSettings& settings);

// Whether vpn.secrets item `key` is present and not empty.
bool has_secret(const VpnSettings& settings, const std::string& key);

// A single sign-on profile: vpn.data "external-browser" ("yes" or a program) or
// "sso-browser" (a command) is set. Its login happens in a browser the auth dialog's
// espvpn --authenticate opens as the desktop user (docs/SSO.md); no password is asked.
bool is_sso_profile(const VpnSettings& settings);

// vpn.data `otp` = yes: the server asks a one-time code after the password (a GP
// challenge, an AnyConnect second form); the auth dialog asks it beside the password
// (secret `otp`) and the service hands it to espvpn as the next stdin line.
bool wants_otp(const VpnSettings& settings);

// binary: the espvpn program; script_command: the vpnc-script command line that
// reports the configuration back (our helper); verbosity: number of -v.
Result<EspvpnCommand> espvpn_command(const std::string& binary, const std::string& script_command,
                                     const VpnSettings& settings, int verbosity);

// The auth dialog's login: `espvpn --authenticate` with the profile's options (its
// own gateway and trust, not the secrets a previous login returned), the password on
// stdin when password_on_stdin (else espvpn asks on its terminal: password, OTP
// rounds, group). Its output becomes the connection's secrets (auth_dialog.h).
// A single sign-on profile adds --external-browser[=PROGRAM] / --sso-browser=COMMAND /
// --sso-timeout=SECONDS; with no terminal (interactive false) --non-inter too, so
// nothing waits on a prompt nobody sees.
Result<std::vector<std::string>> espvpn_authenticate_command(const std::string& binary, const VpnSettings& settings,
                                                             bool password_on_stdin, bool interactive = true);

}  // namespace espvpn::nm
