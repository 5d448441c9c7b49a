#include "src/nm/editor/profile_fields.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

namespace espvpn::nm::editor {
namespace {

bool has_control(std::string_view v) {
    return std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

bool all_of(std::string_view v, bool (*pred)(char)) { return std::all_of(v.begin(), v.end(), pred); }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_base64(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '/' ||
           c == '=';
}
bool is_host_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
           c == '_';
}

// An unsigned decimal in [lo, hi]; false for anything else (sign, blanks, overflow).
bool number_in(std::string_view v, std::uint64_t lo, std::uint64_t hi) {
    if (v.empty() || v.size() > 12) return false;
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() && n >= lo && n <= hi;
}

// "host[:port]" of a URL (after the scheme, before the path): "" when good, else why not.
std::string check_authority(std::string_view authority, const char* what) {
    if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
    if (authority.empty()) return std::string(what) + " has no host";
    std::string_view host = authority, port;
    if (authority.front() == '[') {  // [IPv6]:port
        auto close = authority.find(']');
        if (close == std::string_view::npos || close == 1) return std::string(what) + " has a broken [IPv6] host";
        host = authority.substr(1, close - 1);
        std::string_view rest = authority.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return std::string(what) + " has text after its [IPv6] host";
            port = rest.substr(1);
            if (port.empty()) return std::string(what) + " has an empty port";
        }
        if (!all_of(host, [](char c) { return is_hex(c) || c == ':' || c == '.'; }))
            return std::string(what) + " has a broken [IPv6] host";
    } else {
        if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
            host = authority.substr(0, colon);
            port = authority.substr(colon + 1);
            if (port.empty()) return std::string(what) + " has an empty port";
        }
        if (host.empty()) return std::string(what) + " has no host";
        if (!all_of(host, is_host_char) || host.front() == '-' || host.front() == '.')
            return std::string(what) + " has a host name with characters a host name cannot have";
    }
    if (!port.empty() && !number_in(port, 1, 65535)) return std::string(what) + "'s port is not a number 1-65535";
    return {};
}

constexpr Choice kProtocols[] = {{"anyconnect", "Cisco AnyConnect (ocserv)"}, {"gp", "GlobalProtect"}};
constexpr Choice kPasswordStorage[] = {{"2", "Ask every time"},
                                       {"1", "Saved for this user (keyring)"},
                                       {"0", "Saved for all users"},
                                       {"4", "Not required"}};
// The service reads the token's key from NetworkManager at every login (no agent or
// dialog is asked for it), so NetworkManager keeps it.
constexpr Choice kTokenStorage[] = {{"0", "Saved for all users"}};
constexpr Choice kSso[] = {{"", "None (a password)"},
                           {"external", "In the desktop's browser"},
                           {"driven", "In a browser espvpn drives (Chromium)"}};
constexpr Choice kTokenModes[] = {{"", "None"}, {"totp", "TOTP (time-based)"}, {"hotp", "HOTP (counter; key in a file)"}};
constexpr Choice kOs[] = {{"", "Default (linux-64)"}, {"linux-64", "Linux 64-bit"}, {"linux", "Linux"},
                          {"win", "Windows"},         {"mac-intel", "macOS"},        {"android", "Android"},
                          {"apple-ios", "iOS"}};

std::string no_check(std::string_view) { return {}; }

const std::array kFields = {
    Field{"protocol", "Protocol", Kind::choice, kProtocols, "the server's VPN protocol", nullptr},
    Field{"gateway", "Gateway", Kind::text, {}, "https://vpn.example.com/ (the portal for GlobalProtect)",
          check_gateway, true},
    Field{"user", "User name", Kind::text, {}, "the login name (asked by the server if empty)", check_line},
    Field{"authgroup", "Group", Kind::text, {}, "the login group (AnyConnect) or gateway (GlobalProtect)", check_line},
    Field{"password", "Password", Kind::secret, kPasswordStorage, "", no_check},
    Field{"usercert", "Client certificate", Kind::file, {}, "a PEM/PKCS#12 file or a pkcs11: URI", check_cert_or_uri},
    Field{"userkey", "Private key", Kind::file, {}, "a PEM file or a pkcs11: URI (empty: in the certificate's file)",
          check_cert_or_uri},
    Field{"cafile", "CA certificate", Kind::file, {}, "a PEM file added to the system's CAs", check_file},
    Field{"servercert", "Server pin", Kind::text, {}, "pin-sha256:BASE64, sha256:HEX or sha1:HEX (turns CA trust off)",
          check_pin},
    Field{"proxy", "Proxy", Kind::text, {}, "http://host:port/ or socks5://host:port/", check_proxy},
    Field{"sso", "Single sign-on", Kind::choice, kSso, "where the identity provider's login page opens", nullptr},
    Field{"token_mode", "Soft token", Kind::choice, kTokenModes, "answers the server's one-time-code prompt", nullptr},
    Field{"token_secret", "Token secret", Kind::secret, kTokenStorage, "base32:KEY, 0xHEX, or @FILE", no_check},
    Field{"no_cookie_cache", "Sign in afresh at every connection (GlobalProtect: keep no portal cookie)",
          Kind::boolean, {}, "", nullptr},
    Field{"kill_switch", "Kill switch (block traffic outside the tunnel)", Kind::boolean, {}, "", nullptr},
    Field{"reported_os", "Reported OS", Kind::choice, kOs, "the system espvpn reports to the server", nullptr},
    Field{"useragent", "User agent", Kind::text, {}, "HTTP User-Agent (empty: espvpn's)", check_line},
    Field{"version_string", "Version string", Kind::text, {}, "client version reported at login", check_line},
    Field{"mtu", "MTU", Kind::number, {}, "576-65535 (empty: from the server)", check_mtu},
    Field{"reconnect_timeout", "Reconnect timeout (s)", Kind::number, {}, "give up reconnecting after (default 300)",
          check_seconds},
    Field{"disable_ipv6", "Disable IPv6 in the tunnel", Kind::boolean, {}, "", nullptr},
};

unsigned parse_flags(const std::string* v, unsigned fallback) {
    if (!v || !number_in(*v, 0, 0xff)) return fallback;
    return static_cast<unsigned>(std::stoul(*v));
}

const std::string* item(const std::map<std::string, std::string>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() || it->second.empty() ? nullptr : &it->second;
}

bool is_yes(const std::string* v) { return v && (*v == "yes" || *v == "true" || *v == "1"); }

}  // namespace

std::span<const Field> fields() { return kFields; }

const Field* find_field(std::string_view key) {
    for (const Field& f : kFields)
        if (key == f.key) return &f;
    return nullptr;
}

std::string FormValues::get(const std::string& key) const {
    auto it = values.find(key);
    return it == values.end() ? std::string() : it->second;
}

std::string check_gateway(std::string_view url) {
    if (url.empty()) return "the gateway is required";
    if (has_control(url) || url.find(' ') != std::string_view::npos) return "the gateway URL has blanks or control characters";
    if (url.front() == '-') return "the gateway URL starts with '-'";
    std::string_view rest = url;
    if (auto scheme = rest.find("://"); scheme != std::string_view::npos) {
        if (rest.substr(0, scheme) != "https") return "the gateway URL must start with https:// (or be a host name)";
        rest.remove_prefix(scheme + 3);
    }
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (authority.find('@') != std::string_view::npos) return "the gateway URL must not hold a user name";
    return check_authority(authority, "the gateway URL");
}

std::string check_pin(std::string_view pin) {
    const std::string why =
        "the server pin is in no known form: pin-sha256:BASE64, sha256:HEX, sha1:HEX or HEX (at least 4 characters)";
    auto body_ok = [](std::string_view body, bool (*pred)(char)) { return body.size() >= 4 && all_of(body, pred); };
    if (pin.starts_with("pin-sha256:")) return body_ok(pin.substr(11), is_base64) ? "" : why;
    if (pin.starts_with("sha256:")) return body_ok(pin.substr(7), is_hex) ? "" : why;
    if (pin.starts_with("sha1:")) return body_ok(pin.substr(5), is_hex) ? "" : why;
    return body_ok(pin, is_hex) ? "" : why;
}

std::string check_proxy(std::string_view url) {
    if (has_control(url) || url.find(' ') != std::string_view::npos) return "the proxy URL has blanks or control characters";
    std::string_view rest = url;
    if (auto scheme = rest.find("://"); scheme != std::string_view::npos) {
        std::string_view s = rest.substr(0, scheme);
        if (s != "http" && s != "socks" && s != "socks5" && s != "socks5h")
            return "the proxy must be http://... or socks5://...";
        rest.remove_prefix(scheme + 3);
    }
    return check_authority(rest.substr(0, rest.find('/')), "the proxy URL");
}

std::string check_mtu(std::string_view v) {
    return number_in(v, 576, 65535) ? "" : "the MTU must be a number from 576 to 65535";
}

std::string check_seconds(std::string_view v) {
    return number_in(v, 0, 86400 * 7) ? "" : "the reconnect timeout must be a number of seconds (0 to 604800)";
}

std::string check_file(std::string_view v) {
    if (has_control(v)) return "the file name has control characters";
    return v.front() == '/' ? "" : "the file name must be absolute (start with /)";
}

std::string check_cert_or_uri(std::string_view v) {
    if (v.starts_with("pkcs11:")) return has_control(v) || v.size() == 7 ? "the PKCS#11 URI is empty or broken" : "";
    if (has_control(v)) return "the file name has control characters";
    return v.front() == '/' ? "" : "give an absolute file name (start with /) or a pkcs11: URI";
}

std::string check_line(std::string_view v) { return has_control(v) ? "the text has control characters" : ""; }

FormValues form_from_items(const VpnItems& items) {
    FormValues form;
    for (const Field& f : kFields) {
        const std::string key = f.key;
        if (f.kind == Kind::secret) {
            const std::string* secret = item(items.secrets, key);
            form.values[key] = secret ? *secret : "";
            // Absent flags: NetworkManager's default (saved) for a stored secret; a
            // new password is asked every time, a token key saved.
            const unsigned fallback = secret ? kFlagsSystem : static_cast<unsigned>(std::stoul(f.choices[0].value));
            form.secret_flags[key] = parse_flags(item(items.data, key + "-flags"), fallback);
        } else if (key == "sso") {
            form.values[key] = item(items.data, "sso-browser") ? "driven"
                               : item(items.data, "external-browser") ? "external"
                                                                       : "";
        } else if (f.kind == Kind::boolean) {
            form.values[key] = is_yes(item(items.data, key)) ? "yes" : "";
        } else if (key == "protocol") {
            const std::string* p = item(items.data, key);
            form.values[key] = p && (*p == "gp" || *p == "globalprotect") ? "gp" : p ? *p : "anyconnect";
        } else if (key == "token_mode") {
            const std::string* m = item(items.data, key);
            form.values[key] = m && *m != "none" ? *m : "";
        } else if (key == "cafile") {
            const std::string* v = item(items.data, "cafile");
            if (!v) v = item(items.data, "cacert");  // NetworkManager-openconnect's name, read by the service too
            form.values[key] = v ? *v : "";
        } else if (key == "user") {
            const std::string* v = item(items.data, "user");
            if (!v) v = item(items.data, "username");
            form.values[key] = v ? *v : "";
        } else {
            const std::string* v = item(items.data, key);
            form.values[key] = v ? *v : "";
        }
    }
    return form;
}

std::vector<Invalid> validate_form(const FormValues& form) {
    std::vector<Invalid> bad;
    for (const Field& f : kFields) {
        const std::string v = form.get(f.key);
        if (f.kind == Kind::choice) {
            if (std::none_of(f.choices.begin(), f.choices.end(), [&](const Choice& c) { return v == c.value; }))
                bad.push_back({f.key, std::string(f.label) + ": '" + v + "' is not one of the choices"});
            continue;
        }
        if (f.kind == Kind::secret) {
            auto it = form.secret_flags.find(f.key);
            const std::string flags = std::to_string(it == form.secret_flags.end() ? 0u : it->second);
            if (std::none_of(f.choices.begin(), f.choices.end(), [&](const Choice& c) { return flags == c.value; }))
                bad.push_back({f.key, std::string(f.label) + ": storage " + flags + " is not offered here"});
            continue;
        }
        if (v.empty()) {
            if (f.required) bad.push_back({f.key, std::string(f.label) + " is required"});
            continue;
        }
        if (f.validate)
            if (std::string why = f.validate(v); !why.empty()) bad.push_back({f.key, why});
    }
    // The soft token: its key must be there, and an HOTP key in a file (the counter
    // is written back to it); the service refuses the same (espvpn_command.cpp).
    const std::string mode = form.get("token_mode"), secret = form.get("token_secret");
    if (!mode.empty()) {
        if (secret.empty())
            bad.push_back({"token_secret", "the soft token needs its secret"});
        else if (mode == "hotp" && secret.front() != '@' && secret.front() != '/')
            bad.push_back({"token_secret", "an HOTP token needs its key in a file (@FILE): espvpn writes the next "
                                           "counter back there"});
    }
    return bad;
}

void form_to_items(const FormValues& form, VpnItems& items) {
    auto set = [&](const std::string& key, const std::string& value) {
        if (value.empty()) items.data.erase(key);
        else items.data[key] = value;
    };
    for (const Field& f : kFields) {
        const std::string key = f.key;
        const std::string v = form.get(key);
        if (f.kind == Kind::secret) {
            auto it = form.secret_flags.find(key);
            const unsigned flags = it == form.secret_flags.end() ? kFlagsSystem : it->second;
            const bool used = key != "token_secret" || !form.get("token_mode").empty();
            if (!used) {
                items.data.erase(key + "-flags");
                items.secrets.erase(key);
                continue;
            }
            items.data[key + "-flags"] = std::to_string(flags);
            if (v.empty() || (flags & (kFlagsNotSaved | kFlagsNotRequired))) items.secrets.erase(key);
            else items.secrets[key] = v;
        } else if (key == "sso") {
            if (v == "external") {
                items.data.erase("sso-browser");
                if (!item(items.data, "external-browser")) items.data["external-browser"] = "yes";
            } else if (v == "driven") {
                items.data.erase("external-browser");
                if (!item(items.data, "sso-browser")) items.data["sso-browser"] = "chromium";
            } else {
                items.data.erase("external-browser");
                items.data.erase("sso-browser");
            }
        } else if (key == "cafile") {
            items.data.erase("cacert");
            set(key, v);
        } else if (key == "user") {
            items.data.erase("username");
            set(key, v);
        } else {
            set(key, v);
        }
    }
    add_session_secret_flags(items);
}

void add_session_secret_flags(VpnItems& items) {
    for (const char* session : {"cookie", "gateway", "gwcert", "resolve", "challenge", "challenge2", "challenge3"})
        if (!item(items.data, std::string(session) + "-flags"))
            items.data[std::string(session) + "-flags"] = std::to_string(kFlagsNotSaved);
}

std::vector<std::string> forget_cookies_command(const std::string& espvpn, const FormValues& form) {
    const std::string gateway = form.get("gateway");
    if (form.get("protocol") != "gp" || !check_gateway(gateway).empty()) return {};
    return {espvpn, "--forget-cookies=" + gateway};
}

}  // namespace espvpn::nm::editor
