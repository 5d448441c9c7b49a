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

// The descriptor espvpn reads a soft token's key from (--token-secret=@/dev/fd/3):
// the service hands it a pipe holding EspvpnCommand::token_secret.
inline constexpr int kTokenFd = 3;

// A file the profile names (usercert, userkey, cafile/cacert, a token_secret @FILE): a
// path espvpn would open. For a profile a user owns, the service opens it as that user
// and gives espvpn the descriptor instead (argv[argv_index] = option + "/dev/fd/N").
struct ProfileFile {
    std::string item;        // the vpn.data / vpn.secrets item naming it
    std::string path;
    std::size_t argv_index;  // the argv entry that names it
    std::string option;      // that entry without the path: "--certificate=", "--token-secret=@"
    bool written_back = false;  // an HOTP key file: espvpn writes the next counter back to the path
};

struct EspvpnCommand {
    std::vector<std::string> argv;  // never holds a secret
    Secret stdin_line;              // the cookie, or the password (then "\n" + the one-time code
                                    // of an otp=yes profile); without the final newline
    std::vector<std::string> ignored_keys;  // unknown vpn.data items (logged, not fatal)
    Secret token_secret;  // when not empty: the soft token's key, for espvpn's fd kTokenFd
    std::vector<ProfileFile> files;  // the paths in argv (a pkcs11: URI is not a path)
};

// Who a profile belongs to, from NetworkManager's connection.permissions (each entry a
// type, "user", and a user name). None: a system profile, which only an administrator
// may change (polkit), so the files it names are the administrator's choice and espvpn
// opens them as it is (root). One user: that user's profile; the files it names are
// opened as that user. Anything else (several users, another type) is "shared".
struct ProfileOwner {
    enum class Kind { system, user, shared } kind = Kind::system;
    std::string user;  // Kind::user
};
struct Permission {
    std::string type;  // "user"
    std::string item;  // the user name
};
ProfileOwner profile_owner(const std::vector<Permission>& permissions);

// The files the service must open as the profile's owner before espvpn starts: none for
// a system profile; cmd.files for a user's. Refused: a shared profile naming a file (whose
// rights would decide?), and an HOTP key file in a user's profile (espvpn, root, writes
// its counter back by path: that write would be root's, not the owner's).
Result<std::vector<ProfileFile>> files_to_open(const EspvpnCommand& cmd, const ProfileOwner& owner);

// A user's profile: espvpn's session process (the login, the tunnel) runs as that user
// (--setuid=USER, after argv[0]); a system profile: as espvpn's default session user.
void run_session_as_owner(EspvpnCommand& cmd, const ProfileOwner& owner);

// argv names the file by the descriptor `fd` espvpn inherits (/dev/fd/FD) instead of its path.
void name_by_descriptor(EspvpnCommand& cmd, const ProfileFile& file, int fd);

// The first descriptor the service gives espvpn for the owner's files (after kTokenFd).
inline constexpr int kFirstFileFd = 4;


// A password login whose prompts the service answers on espvpn's prompt channel
// (ServicePrompts, service_prompts.h) instead of stdin lines: --passwd-on-stdin becomes
// --prompt-fd=FD, nothing goes to stdin. False (cmd unchanged) for any other login.
bool use_prompt_channel(EspvpnCommand& cmd, int fd);

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
