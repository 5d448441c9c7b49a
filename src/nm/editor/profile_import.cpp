#include "src/nm/editor/profile_import.h"

#include <glib.h>

#include <memory>

namespace espvpn::nm::editor {
namespace {

using KeyFilePtr = std::unique_ptr<GKeyFile, decltype(&g_key_file_free)>;

std::string take(gchar* s) {
    std::string out = s ? s : "";
    g_free(s);
    return out;
}

// The keys of `group`, each with its value (raw: NetworkManager's keyfile writes vpn
// items unescaped apart from GKeyFile's own rules).
std::map<std::string, std::string> group_items(GKeyFile* kf, const char* group) {
    std::map<std::string, std::string> out;
    gsize n = 0;
    gchar** keys = g_key_file_get_keys(kf, group, &n, nullptr);
    for (gsize i = 0; i < n; ++i) out[keys[i]] = take(g_key_file_get_string(kf, group, keys[i], nullptr));
    g_strfreev(keys);
    return out;
}

bool is_true(const std::string& v) { return v == "1" || v == "true" || v == "yes"; }

void copy_if(const std::map<std::string, std::string>& from, const char* from_key, std::map<std::string, std::string>& to,
             const char* to_key) {
    auto it = from.find(from_key);
    if (it != from.end() && !it->second.empty()) to[to_key] = it->second;
}

// NetworkManager-openconnect's export: [openconnect] with its own key names.
bool import_openconnect_export(GKeyFile* kf, Profile& out, std::string& error) {
    auto g = group_items(kf, "openconnect");
    VpnItems oc;
    auto null_is_empty = [](const std::string& v) { return v == "(null)" ? std::string() : v; };
    const std::pair<const char*, const char*> names[] = {
        {"Host", "gateway"},      {"CACert", "cacert"},        {"Protocol", "protocol"},
        {"Proxy", "proxy"},       {"ReportedOS", "reported_os"}, {"UserCertificate", "usercert"},
        {"PrivateKey", "userkey"}, {"StokenSource", "stoken_source"}, {"CSDWrapper", "csd_wrapper"},
    };
    for (auto [ini, key] : names)
        if (auto it = g.find(ini); it != g.end() && !null_is_empty(it->second).empty()) oc.data[key] = it->second;
    if (auto it = g.find("CSDEnable"); it != g.end() && is_true(it->second)) oc.data["enable_csd_trojan"] = "yes";
    if (auto it = g.find("StokenString"); it != g.end() && !it->second.empty()) oc.secrets["stoken_string"] = it->second;
    if (!oc.data.count("gateway")) {
        error = "the [openconnect] file has no Host";
        return false;
    }
    if (!from_openconnect(oc, out, error)) return false;
    if (auto it = g.find("Description"); it != g.end()) out.name = it->second;
    return true;
}

bool import_keyfile(GKeyFile* kf, Profile& out, std::string& error) {
    const std::string service = take(g_key_file_get_string(kf, "vpn", "service-type", nullptr));
    VpnItems items;
    for (auto& [k, v] : group_items(kf, "vpn"))
        if (k != "service-type" && k != "user-name" && k != "persistent" && k != "timeout") items.data[k] = v;
    items.secrets = group_items(kf, "vpn-secrets");
    const std::string name = take(g_key_file_get_string(kf, "connection", "id", nullptr));
    if (service == kServiceType) {
        out.items = std::move(items);
    } else if (service == kOpenconnectServiceType) {
        if (!from_openconnect(items, out, error)) return false;
    } else {
        error = "the file is a NetworkManager VPN of type '" + service + "', neither espvpn nor openconnect";
        return false;
    }
    out.name = name;
    if (!out.items.data.count("gateway") && !out.items.secrets.count("gateway")) {
        error = "the profile has no gateway";
        return false;
    }
    return true;
}

// An openconnect/espvpn --config file.
bool import_config(std::string_view text, Profile& out, std::string& error) {
    // option -> vpn.data item taking its value
    static const std::map<std::string, std::string> kValues = {
        {"protocol", "protocol"},       {"server", "gateway"},          {"user", "user"},
        {"authgroup", "authgroup"},     {"usergroup", "usergroup"},     {"certificate", "usercert"},
        {"sslkey", "userkey"},          {"cafile", "cafile"},           {"servercert", "servercert"},
        {"proxy", "proxy"},             {"os", "reported_os"},          {"useragent", "useragent"},
        {"version-string", "version_string"}, {"mtu", "mtu"},           {"base-mtu", "base_mtu"},
        {"reconnect-timeout", "reconnect_timeout"}, {"token-mode", "token_mode"}, {"sso-browser", "sso-browser"},
        {"sso-timeout", "sso-timeout"}, {"local-hostname", "local_hostname"}, {"resolve", "resolve"},
    };
    static const std::map<std::string, std::string> kFlags = {
        {"disable-ipv6", "disable_ipv6"}, {"no-dtls", "no_dtls"}, {"kill-switch", "kill_switch"},
        {"no-cookie-cache", "no_cookie_cache"}};
    std::size_t line_no = 0;
    while (!text.empty()) {
        auto nl = text.find('\n');
        std::string line(text.substr(0, nl));
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        ++line_no;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        std::size_t start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#') continue;
        line.erase(0, start);
        if (line.starts_with("--")) line.erase(0, 2);
        std::size_t sep = line.find_first_of("= \t");
        std::string name = line.substr(0, sep);
        std::string value;
        if (sep != std::string::npos) {
            value = line.substr(sep + 1);
            value.erase(0, value.find_first_not_of(" \t") == std::string::npos ? value.size()
                                                                                : value.find_first_not_of(" \t"));
        }
        for (char c : name)
            if (!g_ascii_isalnum(c) && c != '-' && c != '_') {
                error = "line " + std::to_string(line_no) + " is not an option (name=value)";
                return false;
            }
        if (auto it = kValues.find(name); it != kValues.end()) {
            if (value.empty()) {
                error = "line " + std::to_string(line_no) + ": " + name + " needs a value";
                return false;
            }
            out.items.data[it->second] = value;
        } else if (auto f = kFlags.find(name); f != kFlags.end()) {
            out.items.data[f->second] = "yes";
        } else if (name == "external-browser") {
            out.items.data["external-browser"] = value.empty() ? "yes" : value;
        } else if (name == "token-secret") {
            out.items.secrets["token_secret"] = value;
            out.items.data["token_secret-flags"] = "0";
        } else {
            out.left_out.push_back(name);
        }
    }
    auto p = out.items.data.find("protocol");
    if (p != out.items.data.end() && p->second != "gp" && p->second != "anyconnect") {
        error = "protocol '" + p->second + "' is not one espvpn speaks (gp, anyconnect)";
        return false;
    }
    if (!out.items.data.count("gateway")) {
        error = "the file names no server (a line server=https://...)";
        return false;
    }
    return true;
}

}  // namespace

bool from_openconnect(const VpnItems& oc, Profile& out, std::string& error) {
    const auto& d = oc.data;
    std::string protocol = "anyconnect";
    if (auto it = d.find("protocol"); it != d.end() && !it->second.empty()) protocol = it->second;
    if (protocol != "anyconnect" && protocol != "gp") {
        error = "the NetworkManager-openconnect profile's protocol '" + protocol +
                "' is not one espvpn speaks (gp, anyconnect)";
        return false;
    }
    VpnItems& e = out.items;
    e.data["protocol"] = protocol;
    copy_if(d, "gateway", e.data, "gateway");
    copy_if(d, "cacert", e.data, "cafile");
    for (const char* same : {"usercert", "userkey", "proxy", "reported_os", "mtu", "useragent", "usergroup",
                             "authgroup", "local_hostname", "reconnect_timeout", "disable_ipv6"})
        copy_if(d, same, e.data, same);
    // The login name NM-openconnect's dialog saved (form fields are kept as secrets).
    for (const char* form : {"form:main:username", "form:_login:user", "form:main:user"}) {
        if (auto s = oc.secrets.find(form); s != oc.secrets.end() && !s->second.empty() && !e.data.count("user"))
            e.data["user"] = s->second;
    }
    // The soft token (NM-openconnect: stoken_source, secret stoken_string).
    if (auto src = d.find("stoken_source"); src != d.end() && !src->second.empty() && src->second != "disabled") {
        if (src->second == "totp" || src->second == "hotp") {
            e.data["token_mode"] = src->second;
            const std::string* key = nullptr;
            if (auto s = oc.secrets.find("stoken_string"); s != oc.secrets.end() && !s->second.empty())
                key = &s->second;
            else if (auto old = d.find("stoken_string"); old != d.end() && !old->second.empty())
                key = &old->second;  // older versions kept it in vpn.data
            if (key) e.secrets["token_secret"] = *key;
            // NetworkManager keeps it: the service reads it there at every login (an
            // agent's copy would not reach it).
            e.data["token_secret-flags"] = "0";
            if (auto flags = d.find("stoken_string-flags"); flags != d.end() && flags->second != "0")
                out.left_out.push_back("stoken_string-flags=" + flags->second + " (the key is now kept by NetworkManager)");
        } else {
            out.left_out.push_back("stoken_source=" + src->second + " (espvpn's soft tokens: totp, hotp)");
        }
    }
    // A server certificate the user accepted there: the pin espvpn checks.
    auto gwcert = oc.secrets.find("gwcert");
    if (gwcert != oc.secrets.end() && check_pin(gwcert->second).empty()) e.data["servercert"] = gwcert->second;
    // The password, where that dialog kept one, with its flags.
    for (const char* form : {"form:main:password", "form:_login:passwd"}) {
        if (auto s = oc.secrets.find(form); s != oc.secrets.end() && !s->second.empty()) {
            e.secrets["password"] = s->second;
            e.data["password-flags"] = "0";
        }
    }
    if (!e.data.count("password-flags")) e.data["password-flags"] = std::to_string(kFlagsNotSaved);
    if (auto csd = d.find("enable_csd_trojan"); csd != d.end() && is_true(csd->second))
        out.left_out.push_back("enable_csd_trojan (Cisco Secure Desktop)");
    if (auto w = d.find("csd_wrapper"); w != d.end() && !w->second.empty()) out.left_out.push_back("csd_wrapper");
    return true;
}

bool import_profile(std::string_view text, Profile& out, std::string& error) {
    out = Profile{};
    if (text.find('\0') != std::string_view::npos) {
        error = "the file is not text";
        return false;
    }
    KeyFilePtr kf(g_key_file_new(), g_key_file_free);
    GError* parse_error = nullptr;
    const bool ini = g_key_file_load_from_data(kf.get(), text.data(), text.size(), G_KEY_FILE_NONE, &parse_error);
    if (parse_error) g_error_free(parse_error);
    if (ini && g_key_file_has_group(kf.get(), "openconnect")) return import_openconnect_export(kf.get(), out, error);
    if (ini && g_key_file_has_group(kf.get(), "vpn")) return import_keyfile(kf.get(), out, error);
    if (ini) {
        error = "the file has neither a [vpn] nor an [openconnect] group";
        return false;
    }
    return import_config(text, out, error);
}

std::string export_profile(const Profile& profile) {
    KeyFilePtr kf(g_key_file_new(), g_key_file_free);
    g_key_file_set_string(kf.get(), "connection", "id", profile.name.c_str());
    g_key_file_set_string(kf.get(), "connection", "type", "vpn");
    g_key_file_set_string(kf.get(), "vpn", "service-type", kServiceType);
    for (const auto& [k, v] : profile.items.data) g_key_file_set_string(kf.get(), "vpn", k.c_str(), v.c_str());
    gsize n = 0;
    return take(g_key_file_to_data(kf.get(), &n, nullptr));
}

}  // namespace espvpn::nm::editor
