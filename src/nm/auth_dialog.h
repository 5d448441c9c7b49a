// nm-espvpn-auth-dialog's decisions, without I/O: which secrets a connection needs
// asked, the answers of NetworkManager's two auth-dialog protocols, and the
// secrets taken from `espvpn --authenticate`. Unit-tested (tests/unit/src/nm/).
//
// NetworkManager's clients start the dialog as
//   nm-espvpn-auth-dialog -u UUID -n NAME -s SERVICE [-i] [-r] [--external-ui-mode] [-t HINT]...
// and write the profile's data items and secrets to its stdin (DATA_KEY=/DATA_VAL=/
// SECRET_KEY=/SECRET_VAL= lines, DONE). Two protocols:
//   external UI (nmcli, GNOME Shell, nm-applet >= 1.8): the dialog prints a key file saying
//     which secrets to ask ([VPN Plugin UI] + one group per secret); the client asks the
//     user (nmcli --ask, passwd-file, its password dialog) and hands the values to
//     NetworkManager itself. From a desktop agent (a display, no terminal) the dialog logs
//     in in its window instead and the key file hands the results over as fields not to
//     ask (handed_secrets);
//   classic (agents without the external UI): the dialog gets the secrets itself and prints
//     them as "key\nvalue\n" pairs ending with an empty line, then waits for QUIT.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "src/nm/espvpn_command.h"

namespace espvpn::nm {

// A secret the client should ask for (external UI).
struct AskedSecret {
    std::string key;    // vpn.secrets item, e.g. "password"
    std::string label;  // what the user is shown
    bool should_ask = true;
    // Handed to the client as the field's Value (ShouldAsk=false only): a secret the
    // client does not have, i.e. one the dialog read from the user's Secret Service
    // (nm-applet leaves that to the plugin's dialog). Empty: no Value, so a secret the
    // client gave the dialog is never echoed back.
    Secret value;
};

// NMSettingSecretFlags of vpn.secrets item `key`, from its "<key>-flags" data item.
unsigned secret_flags(const VpnSettings& settings, const std::string& key);

// The password, unless its flags say "not required", or a cookie the service can use
// is there already and no new secrets were requested (reprompt = -r); should_ask is
// false when the password is present and no new one was requested. A single sign-on
// profile without a stored password asks nothing: its login is in the browser. An
// otp=yes profile also gets a one-time code (secret `otp`), always asked.
std::vector<AskedSecret> secrets_to_ask(const VpnSettings& settings, bool reprompt);

// A login is to be done (external UI from a desktop agent: the login window does it):
// the password is not marked "not required" and there is no cookie, or new secrets were
// requested (reprompt = -r). Unlike secrets_to_ask, also for a single sign-on profile,
// whose login the window runs in the browser.
bool needs_login(const VpnSettings& settings, bool reprompt);

// The external-UI key file (GLib key-file syntax, values escaped). description: the
// client's message (empty: "Password needed for the VPN connection ...").
std::string external_ui_reply(const std::string& connection_name, const VpnSettings& settings,
                              const std::vector<AskedSecret>& asked, std::string_view description = {});

// A prompt round of the service (service_prompts.h: SecretsRequired with a round's secret
// (challenge, challenge2, ...) and kLabelHint among the hints, which a client passes as -t when the .name file says
// supports-hints): the one field to ask, labelled in the server's words, and the client's
// message (NetworkManager's x-vpn-message: hint). nullopt without a round's secret.
struct ChallengeRound {
    AskedSecret field;
    std::string message;
};
std::optional<ChallengeRound> challenge_round(const std::vector<std::string>& hints);

// The secrets a login produced (cookie, gateway, ...) as external-UI fields not to ask,
// each with its value: nm-applet and GNOME Shell hand such fields to NetworkManager as
// they are (nmcli ignores them). Labels are the keys.
std::vector<AskedSecret> handed_secrets(const std::map<std::string, Secret>& secrets);

// `espvpn --authenticate` output (COOKIE='...' lines) -> the secrets the service
// takes: cookie, gateway (CONNECT_URL), gwcert (FINGERPRINT), resolve (RESOLVE;
// left out when empty or when the host is already the address).
Result<std::map<std::string, Secret>> secrets_from_authenticate(std::string_view output);

// The classic reply: "key\nvalue\n" for each secret, then "\n\n". Values must not
// hold a newline (cookies, URLs and pins never do): an error otherwise.
Result<Secret> classic_reply(const std::map<std::string, Secret>& secrets);

}  // namespace espvpn::nm
