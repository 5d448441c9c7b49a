// The fields of an espvpn VPN profile as the connection editors show them: one table
// (key, label, kind, choices, validator) that the GTK3 and the GTK4 editor both build
// their form from, and the mapping between the fields and the connection's vpn.data
// items / vpn.secrets that nm-espvpn-service reads (src/nm/espvpn_command.cpp).
// Pure: no GTK, no libnm; unit-tested (tests/unit/src/nm/test_profile_fields.cpp).
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace espvpn::nm::editor {

enum class Kind {
    text,     // one line of text
    choice,   // one of `choices` (value "" = the first, the default)
    file,     // a file name (absolute) or, where allowed, a PKCS#11 URI
    boolean,  // on = "yes" in vpn.data, off = item absent
    number,   // decimal
    secret,   // vpn.secrets item; its storage in vpn.data "KEY-flags"
};

struct Choice {
    const char* value;  // stored in vpn.data ("" = item absent)
    const char* label;
};

struct Field {
    const char* key;    // the vpn.data item (the secret's name for Kind::secret)
    const char* label;  // shown beside the widget; also its accessible name
    Kind kind;
    std::span<const Choice> choices;  // Kind::choice, and the storage choices of Kind::secret
    const char* hint;                 // placeholder / tooltip
    // Why `value` is not acceptable ("" = it is). Empty values are checked only for
    // required fields. Null: anything goes.
    std::string (*validate)(std::string_view value);
    bool required = false;
};

// Every field, in the order the editors show them.
std::span<const Field> fields();
const Field* find_field(std::string_view key);

// NetworkManager's secret flags (NMSettingSecretFlags) the editors offer.
inline constexpr unsigned kFlagsSystem = 0;      // NetworkManager keeps it
inline constexpr unsigned kFlagsAgent = 1;       // the user's agent (keyring) keeps it
inline constexpr unsigned kFlagsNotSaved = 2;    // asked at every connection
inline constexpr unsigned kFlagsNotRequired = 4;

// What the form holds: a text per field key (boolean: "yes" or ""; choice: the
// choice's value; secret: the secret's text) and each secret's flags.
struct FormValues {
    std::map<std::string, std::string> values;
    std::map<std::string, unsigned> secret_flags;
    std::string get(const std::string& key) const;
};

// A connection's VPN setting, as plain maps.
struct VpnItems {
    std::map<std::string, std::string> data;
    std::map<std::string, std::string> secrets;
};

// The form for a connection (fields absent from `items` get their defaults).
FormValues form_from_items(const VpnItems& items);

struct Invalid {
    std::string key;     // the field
    std::string reason;  // a sentence for the user
};
// Every field whose value is not acceptable, in table order.
std::vector<Invalid> validate_form(const FormValues& form);

// Writes the form into `items`: each field's item set or removed, secrets with their
// "-flags" item (a secret that is not saved is removed from `secrets`); items the
// table does not know (e.g. resolve, otp, local_hostname) are kept as they were; then
// add_session_secret_flags.
void form_to_items(const FormValues& form, VpnItems& items);

// The secrets a login hands NetworkManager (the auth dialog's cookie, gateway, gwcert,
// resolve; the service's prompt rounds' challenge, challenge2, challenge3) are for one
// session: "-flags" 2 (not saved), where the profile has no flags for them. Else NetworkManager writes them into the profile, and the cookie, logged out at
// disconnect, answers the next connection and fails it. NetworkManager-openconnect's editor
// writes the same flags. The editor's save and the import add them.
void add_session_secret_flags(VpnItems& items);

// Validators, exposed for the tests and the import.
std::string check_gateway(std::string_view url);

// The editor's "Forget saved sign-in" button of a GlobalProtect profile: the command it
// runs as the desktop user (`espvpn --forget-cookies=PORTAL`), who owns the portal cookie
// the login window's espvpn saved. Empty when the form names no valid GP portal.
std::vector<std::string> forget_cookies_command(const std::string& espvpn, const FormValues& form);
std::string check_pin(std::string_view pin);
std::string check_proxy(std::string_view url);
std::string check_mtu(std::string_view v);
std::string check_seconds(std::string_view v);
std::string check_cert_or_uri(std::string_view v);
std::string check_file(std::string_view v);
std::string check_line(std::string_view v);

}  // namespace espvpn::nm::editor
