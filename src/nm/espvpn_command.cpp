#include "src/nm/espvpn_command.h"

#include <pwd.h>

#include <algorithm>
#include <string_view>

namespace espvpn::nm {
namespace {

const std::string* data_value(const VpnSettings& s, const std::string& key) {
    auto it = s.data.find(key);
    if (it == s.data.end() || it->second.empty()) return nullptr;
    return &it->second;
}

const Secret* secret_value(const VpnSettings& s, const std::string& key) {
    auto it = s.secrets.find(key);
    if (it == s.secrets.end() || it->second.empty()) return nullptr;
    return &it->second;
}

// A value from the secrets if present there (NM-openconnect's auth dialog returns
// gateway/gwcert/resolve as secrets), else from vpn.data.
std::string data_or_secret(const VpnSettings& s, const std::string& data_key, const std::string& secret_key) {
    if (const Secret* v = secret_value(s, secret_key)) return std::string(v->reveal_text());
    if (const std::string* v = data_value(s, data_key)) return *v;
    return {};
}

bool is_yes(const std::string& v) { return v == "yes" || v == "true" || v == "1"; }

// vpn.data item -> espvpn option taking its value (openconnect's option names).
struct ValueOption {
    const char* key;
    const char* option;
};
constexpr ValueOption kValueOptions[] = {
    {"user", "--user"},           {"username", "--user"},         {"authgroup", "--authgroup"},
    {"usergroup", "--usergroup"}, {"usercert", "--certificate"},  {"userkey", "--sslkey"},
    {"reported_os", "--os"},      {"useragent", "--useragent"},   {"local_hostname", "--local-hostname"},
    {"mtu", "--mtu"},             {"base_mtu", "--base-mtu"},     {"reconnect_timeout", "--reconnect-timeout"},
    {"proxy", "--proxy"},  // as NetworkManager-openconnect passes it
    {"version_string", "--version-string"},
};
// Keys handled specially below, or bookkeeping NM itself keeps in vpn.data.
constexpr const char* kOtherKeys[] = {"gateway", "protocol", "servercert", "cafile",     "cacert",
                                      "resolve", "disable_ipv6", "no_dtls",    "otp",        "kill_switch",
                                      "token_mode", "no_cookie_cache"};
// Items of a NetworkManager-openconnect profile that only its auth dialog reads (the
// login happened there; the service gets the cookie): not passed on, not "unknown".
constexpr const char* kAuthDialogKeys[] = {"authtype",          "key_pass",           "pem_passphrase_fsid",
                                           "prevent_invalid_cert", "enable_csd_trojan", "csd_wrapper",
                                           "stoken_source",     "stoken_string",
                                           // single sign-on: the dialog's login (espvpn_authenticate_command)
                                           "external-browser", "sso-browser", "sso-timeout"};

bool known_key(const std::string& key) {
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "-flags") == 0) return true;  // secret flags
    if (key.starts_with("form:")) return true;  // the auth dialog's saved form fields
    for (const auto& o : kValueOptions)
        if (key == o.key) return true;
    for (const char* k : kOtherKeys)
        if (key == k) return true;
    for (const char* k : kAuthDialogKeys)
        if (key == k) return true;
    return false;
}

}  // namespace

bool has_secret(const VpnSettings& settings, const std::string& key) { return secret_value(settings, key) != nullptr; }

bool is_sso_profile(const VpnSettings& settings) {
    return data_value(settings, "external-browser") || data_value(settings, "sso-browser");
}

bool wants_otp(const VpnSettings& settings) {
    const std::string* v = data_value(settings, "otp");
    return v && is_yes(*v);
}

bool has_login_secret(const VpnSettings& settings) {
    return secret_value(settings, "cookie") || secret_value(settings, "password");
}

namespace {

// `option` + `value` appended to argv; a path (not a pkcs11: URI) is noted in `files`.
void add_maybe_file(std::vector<std::string>& argv, std::vector<ProfileFile>* files, const char* item,
                    const std::string& option, const std::string& value) {
    argv.push_back(option + value);
    if (files && !value.starts_with("pkcs11:")) files->push_back({item, value, argv.size() - 1, option});
}

bool is_file_item(const std::string& key) { return key == "usercert" || key == "userkey"; }

// The options both commands take from the profile (everything but the login secret and
// the script): appended to argv, the files among them noted in `files` when given.
// Returns the server URL.
Result<std::string> add_profile_options(const VpnSettings& s, std::vector<std::string>& argv, bool dialog_secrets,
                                        std::vector<ProfileFile>* files = nullptr) {
    const std::string gateway = dialog_secrets ? data_or_secret(s, "gateway", "gateway")
                                               : (data_value(s, "gateway") ? *data_value(s, "gateway") : "");
    if (gateway.empty()) return make_error("the connection has no gateway (vpn.data item 'gateway')");
    if (gateway.front() == '-') return make_error("gateway '" + gateway + "' is not a server address");

    std::string protocol = "anyconnect";
    if (const std::string* p = data_value(s, "protocol")) {
        if (*p == "gp" || *p == "globalprotect") protocol = "gp";
        else if (*p != "anyconnect") return make_error("protocol '" + *p + "' is not supported (gp or anyconnect)");
    }
    argv.push_back("--protocol=" + protocol);
    for (const auto& o : kValueOptions)
        if (const std::string* v = data_value(s, o.key)) {
            if (is_file_item(o.key)) add_maybe_file(argv, files, o.key, std::string(o.option) + "=", *v);
            else argv.push_back(std::string(o.option) + "=" + *v);
        }

    // The pinned certificate alone decides (openconnect: --servercert disables CA
    // trust); without one, the profile's CA file is added to the system CAs. The auth
    // dialog logs in with the profile's trust (a gwcert secret is its own output).
    const std::string servercert = dialog_secrets ? data_or_secret(s, "servercert", "gwcert")
                                                  : (data_value(s, "servercert") ? *data_value(s, "servercert") : "");
    if (!servercert.empty()) argv.push_back("--servercert=" + servercert);
    if (const std::string* ca = data_value(s, "cafile")) add_maybe_file(argv, files, "cafile", "--cafile=", *ca);
    else if (const std::string* ca2 = data_value(s, "cacert")) add_maybe_file(argv, files, "cacert", "--cafile=", *ca2);
    const std::string resolve = dialog_secrets ? data_or_secret(s, "resolve", "resolve")
                                               : (data_value(s, "resolve") ? *data_value(s, "resolve") : "");
    if (!resolve.empty()) argv.push_back("--resolve=" + resolve);
    if (const std::string* v = data_value(s, "disable_ipv6"); v && is_yes(*v)) argv.push_back("--disable-ipv6");
    if (const std::string* v = data_value(s, "no_dtls"); v && is_yes(*v)) argv.push_back("--no-dtls");
    // GlobalProtect's portal cookie across runs (the login window's espvpn saves and uses it
    // as the desktop user; a service login with a password as root): off when asked.
    if (const std::string* v = data_value(s, "no_cookie_cache"); v && is_yes(*v))
        argv.push_back("--no-cookie-cache");
    return gateway;
}

// token_mode = totp / hotp with the secret token_secret: the key goes to espvpn on
// kTokenFd (a pipe the caller fills), never into argv; a key file (@FILE or an
// absolute path) is named as is, and is the only form HOTP takes (its counter is
// written back there; NetworkManager's stored secret could not follow it).
Status add_soft_token(const VpnSettings& s, EspvpnCommand& cmd) {
    const std::string* mode = data_value(s, "token_mode");
    if (!mode || *mode == "none") return {};
    if (*mode != "totp" && *mode != "hotp")
        return make_error("token_mode '" + *mode + "' is not supported (totp or hotp)");
    const Secret* secret = secret_value(s, "token_secret");
    if (!secret) return make_error("the connection has token_mode=" + *mode + " and no 'token_secret' secret");
    const std::string_view text = secret->reveal_text();
    cmd.argv.push_back("--token-mode=" + *mode);
    if (text.front() == '@' || text.front() == '/') {
        for (char c : text)
            if (static_cast<unsigned char>(c) < 0x20) return make_error("the soft token's file name has a control character");
        const bool at = text.front() == '@';
        cmd.argv.push_back("--token-secret=" + std::string(text));
        cmd.files.push_back({"token_secret", std::string(text.substr(at ? 1 : 0)), cmd.argv.size() - 1,
                             at ? "--token-secret=@" : "--token-secret=", *mode == "hotp"});
        return {};
    }
    if (*mode == "hotp")
        return make_error("an HOTP token needs its key in a file (token_secret @FILE), where espvpn writes the "
                          "next counter back");
    cmd.argv.push_back("--token-secret=@/dev/fd/" + std::to_string(kTokenFd));
    cmd.token_secret = secret->clone();
    return {};
}

}  // namespace

bool use_prompt_channel(EspvpnCommand& cmd, int fd) {
    auto it = std::find(cmd.argv.begin(), cmd.argv.end(), "--passwd-on-stdin");
    if (it == cmd.argv.end()) return false;
    *it = "--prompt-fd=" + std::to_string(fd);
    cmd.stdin_line = Secret();
    return true;
}

Result<EspvpnCommand> espvpn_command(const std::string& binary, const std::string& script_command,
                                     const VpnSettings& s, int verbosity) {
    EspvpnCommand cmd;
    auto& argv = cmd.argv;
    argv.push_back(binary);
    auto gateway = add_profile_options(s, argv, true, &cmd.files);
    if (!gateway) return gateway.error();

    // The secret goes to stdin, never into argv (readable by every user in /proc).
    // Nobody is at a terminal. With a cookie, --non-inter makes any prompt fail; with
    // a password it is left out, because espvpn's --non-inter also refuses the
    // --passwd-on-stdin line (openconnect reads it); stdin is our pipe, so a second
    // prompt meets end of input and fails too, it never waits.
    if (const Secret* cookie = secret_value(s, "cookie")) {
        argv.push_back("--cookie-on-stdin");
        argv.push_back("--non-inter");
        cmd.stdin_line = cookie->clone();
    } else if (const Secret* password = secret_value(s, "password")) {
        argv.push_back("--passwd-on-stdin");
        cmd.stdin_line = password->clone();
        if (wants_otp(s)) {
            // espvpn reads the server's next prompt (the challenge) from the next line.
            const Secret* otp = secret_value(s, "otp");
            if (!otp) return make_error("the connection wants a one-time code (otp=yes) and none came with it");
            for (char c : otp->reveal_text())
                if (c == '\n' || c == '\r') return make_error("the one-time code spans more than one line");
            for (char c : cmd.stdin_line.reveal_text())
                if (c == '\n' || c == '\r') return make_error("the login secret spans more than one line");
            Secret lines(password->size() + 1 + otp->size());
            auto bytes = lines.reveal_mutable();
            std::size_t at = 0;
            for (char c : password->reveal_text()) bytes[at++] = static_cast<std::uint8_t>(c);
            bytes[at++] = '\n';
            for (char c : otp->reveal_text()) bytes[at++] = static_cast<std::uint8_t>(c);
            cmd.stdin_line = std::move(lines);
        }
    } else if (is_sso_profile(s)) {
        return make_error("the connection signs in through a browser (single sign-on) and no login cookie came "
                          "with it: connect it from a desktop whose agent runs nm-espvpn-auth-dialog in its "
                          "classic protocol (nm-applet), or log in with `espvpn --authenticate` and store the "
                          "cookie (docs/SSO.md)");
    } else {
        return make_error("the connection has neither a 'cookie' nor a 'password' secret");
    }
    if (!wants_otp(s) || secret_value(s, "cookie"))
        for (char c : cmd.stdin_line.reveal_text())
            if (c == '\n' || c == '\r') return make_error("the login secret spans more than one line");

    if (const std::string* v = data_value(s, "kill_switch"); v && is_yes(*v)) argv.push_back("--kill-switch");
    if (auto st = add_soft_token(s, cmd); !st) return st.error();

    argv.push_back("--script=" + script_command);
    for (int i = 0; i < std::clamp(verbosity, 0, 3); ++i) argv.push_back("--verbose");
    argv.push_back(*gateway);

    for (const auto& [key, value] : s.data)
        if (!known_key(key)) cmd.ignored_keys.push_back(key);
    return cmd;
}

ProfileOwner profile_owner(const std::vector<Permission>& permissions) {
    if (permissions.empty()) return {};
    if (permissions.size() == 1 && permissions[0].type == "user" && !permissions[0].item.empty())
        return {ProfileOwner::Kind::user, permissions[0].item};
    return {ProfileOwner::Kind::shared, {}};
}

void run_session_as_owner(EspvpnCommand& cmd, const ProfileOwner& owner) {
    if (owner.kind != ProfileOwner::Kind::user || owner.user.empty() || cmd.argv.empty()) return;
    // A profile root owns: espvpn's default session user (it refuses -U root).
    if (const passwd* pw = ::getpwnam(owner.user.c_str()); pw && pw->pw_uid == 0) return;
    cmd.argv.insert(cmd.argv.begin() + 1, "--setuid=" + owner.user);
    for (ProfileFile& f : cmd.files) ++f.argv_index;
}

Result<std::vector<ProfileFile>> files_to_open(const EspvpnCommand& cmd, const ProfileOwner& owner) {
    if (owner.kind == ProfileOwner::Kind::system || cmd.files.empty()) return std::vector<ProfileFile>{};
    if (owner.kind == ProfileOwner::Kind::shared)
        return make_error("the profile is shared by several users (connection.permissions) and names a file ('" +
                          cmd.files.front().item + "'): whose file it is cannot be told; give each user a profile "
                          "of their own, or make it a system profile (no permissions)");
    for (const auto& f : cmd.files)
        if (f.written_back)
            return make_error("the profile's 'token_secret' is an HOTP key file and the profile belongs to " +
                              owner.user + ": espvpn would write its counter back with root's rights; use "
                              "token_mode=totp, or a system profile (no connection.permissions)");
    return cmd.files;
}

void name_by_descriptor(EspvpnCommand& cmd, const ProfileFile& file, int fd) {
    cmd.argv.at(file.argv_index) = file.option + "/dev/fd/" + std::to_string(fd);
}

Result<std::vector<std::string>> espvpn_authenticate_command(const std::string& binary, const VpnSettings& s,
                                                             bool password_on_stdin, bool interactive) {
    std::vector<std::string> argv{binary};
    auto gateway = add_profile_options(s, argv, false);
    if (!gateway) return gateway.error();
    if (const std::string* v = data_value(s, "external-browser"))
        argv.push_back(is_yes(*v) ? std::string("--external-browser") : "--external-browser=" + *v);
    if (const std::string* v = data_value(s, "sso-browser")) argv.push_back("--sso-browser=" + *v);
    if (const std::string* v = data_value(s, "sso-timeout")) argv.push_back("--sso-timeout=" + *v);
    if (password_on_stdin) argv.push_back("--passwd-on-stdin");
    else if (!interactive) argv.push_back("--non-inter");
    argv.push_back("--authenticate");
    argv.push_back(*gateway);
    return argv;
}

}  // namespace espvpn::nm
