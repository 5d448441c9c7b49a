#include "src/cli/options.h"

#include <getopt.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "protocols/base/exec_array.h"
#include "protocols/proxy/proxy.h"
#include "protocols/tunnel/tunnel_config.h"
#include "src/session/trusted_network.h"
#include "protocols/captive/captive_probe.h"

namespace espvpn::cli {
namespace {

enum class Arg { none, required, optional };  // optional: only as --name=VALUE

struct OptionSpec {
    const char* name;
    char short_name;  // 0: long only
    Arg arg;
    const char* group;
    const char* help;  // nullptr: accepted but not listed
    std::function<Status(ClientOptions&, const char*)> apply;
};

Status parse_int(const char* option, const char* text, int min, int max, int& out) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(text, &end, 10);
    if (errno || !end || *end || end == text || v < min || v > max)
        return make_error(std::string("--") + option + ": '" + text + "' is not a number from " +
                          std::to_string(min) + " to " + std::to_string(max));
    out = static_cast<int>(v);
    return {};
}

Status unsupported(const char* option, const char* why) {
    return make_error(std::string("--") + option + " is not supported: " + why);
}

// An openconnect option that changes nothing in espvpn: accepted, the reason logged at debug.
std::function<Status(ClientOptions&, const char*)> no_op(const char* option, const char* why) {
    return [option, why](ClientOptions& o, const char*) -> Status {
        o.no_op_notes.push_back(std::string("--") + option + " has no effect: " + why);
        return {};
    };
}

// An openconnect option espvpn does not do: accepted by the parser (not listed in
// --help), its use an error saying why or what espvpn does instead.
OptionSpec refused(const char* name, char short_name, Arg arg, const char* group, const char* instead) {
    return {name, short_name, arg, group, nullptr,
            [name, instead](ClientOptions&, const char*) -> Status { return unsupported(name, instead); }};
}

// A comma-separated list appended to `out` (empty items refused).
Status add_list(std::vector<std::string>& out, std::string_view v, const char* option) {
    std::size_t start = 0;
    for (;;) {
        const auto comma = v.find(',', start);
        const std::string_view item = v.substr(start, comma == std::string_view::npos ? v.npos : comma - start);
        if (item.empty()) return make_error(std::string("--") + option + ": an empty name in '" + std::string(v) + "'");
        out.emplace_back(item);
        if (comma == std::string_view::npos) return {};
        start = comma + 1;
    }
}

#define SET_STRING(field) [](ClientOptions& o, const char* v) -> Status { o.field = v; return {}; }
#define SET_FLAG(field) [](ClientOptions& o, const char*) -> Status { o.field = true; return {}; }
#define SET_ACTION(a) [](ClientOptions& o, const char*) -> Status { o.action = Action::a; return {}; }
#define SET_INT(field, opt, lo, hi) \
    [](ClientOptions& o, const char* v) -> Status { return parse_int(opt, v, lo, hi, o.field); }

const std::vector<OptionSpec>& option_table() {
    static const std::vector<OptionSpec> table = {
        // General
        {"help", 'h', Arg::none, "General", "show this help and exit", SET_ACTION(help)},
        {"version", 'V', Arg::none, "General", "print the version and exit", SET_ACTION(version)},
        {"self-check", 0, Arg::none, "General", "print crypto library, CPU features and ESP suites, then exit",
         SET_ACTION(self_check)},
        {"config", 0, Arg::required, "General", "read further options from FILE (one per line, no dashes)",
         [](ClientOptions&, const char*) -> Status { return {}; }},  // expanded before parsing
        {"protocol", 0, Arg::required, "Set VPN protocol", "gp (GlobalProtect) or anyconnect (default)",
         [](ClientOptions& o, const char* v) -> Status {
             std::string p = v;
             if (p == "gp" || p == "globalprotect") o.protocol = Protocol::gp;
             else if (p == "anyconnect" || p == "openconnect") o.protocol = Protocol::anyconnect;
             else return make_error("--protocol: '" + p + "' is not supported (use gp or anyconnect)");
             return {};
         }},
        {"server", 0, Arg::required, "Internet connectivity", "the server URL (instead of the positional argument)",
         SET_STRING(server)},
        {"background", 'b', Arg::none, "Process control", "continue in background after startup", SET_FLAG(background)},
        {"pid-file", 0, Arg::required, "Process control", "write the daemon's PID to this file", SET_STRING(pid_file)},
        {"setuid", 'U', Arg::required, "Process control", "run the session process (login, tunnel) as USER", SET_STRING(setuid_user)},
        {"stats-json", 0, Arg::required, "Logging (two-phase)", "write traffic and drop counters to FILE periodically",
         SET_STRING(stats_json)},
        {"status-socket", 0, Arg::required, "Process control",
         "serve status/disconnect/reconnect on this AF_UNIX socket (espvpn status; docs/SERVICE.md)",
         SET_STRING(status_socket)},
        {"status-user", 0, Arg::required, "Process control",
         "users (comma-separated) allowed on the status socket beside root and espvpn's own user",
         [](ClientOptions& o, const char* v) -> Status { return add_list(o.status_users, v, "status-user"); }},
        {"status-group", 0, Arg::required, "Process control", "groups (comma-separated) allowed on the status socket",
         [](ClientOptions& o, const char* v) -> Status { return add_list(o.status_groups, v, "status-group"); }},
        {"always-on", 0, Arg::none, "Process control",
         "never give up: reconnect without --reconnect-timeout, log in again when the session ends, "
         "wait (state needs-login) when a login needs a person",
         SET_FLAG(always_on)},
        {"trusted-domain", 0, Arg::required, "Process control",
         "with --always-on: no tunnel while a DNS search domain (/etc/resolv.conf) is one of these "
         "(comma-separated; *.example.com for any below it)",
         [](ClientOptions& o, const char* v) -> Status {
             std::string_view rest = v;
             for (;;) {
                 const auto comma = rest.find(',');
                 auto d = session::parse_trusted_domain(rest.substr(0, comma));
                 if (!d) return d.error();
                 o.trusted_domains.push_back(*d);
                 if (comma == std::string_view::npos) return {};
                 rest.remove_prefix(comma + 1);
             }
         }},
        {"trusted-server", 0, Arg::required, "Process control",
         "with --always-on: no tunnel while this TLS server answers within 2 s with the pinned certificate "
         "(HOST:PORT,pin-sha256:BASE64); repeatable",
         [](ClientOptions& o, const char* v) -> Status {
             if (auto s = session::parse_trusted_server(v); !s) return s.error();
             o.trusted_servers.emplace_back(v);
             return {};
         }},
        {"captive-probe", 0, Arg::required, "Internet connectivity",
         "when the gateway cannot be reached, look for a captive portal with this http:// URL and the body it "
         "answers on an open network (URL[,EXPECTED]; NetworkManager's check by default)",
         [](ClientOptions& o, const char* v) -> Status {
             if (auto s = captive::parse_probe_spec(v); !s) return s.error();
             o.captive_probe = v;
             return {};
         }},
        {"no-captive-probe", 0, Arg::none, "Internet connectivity", "never look for a captive portal",
         SET_FLAG(no_captive_probe)},
        {"captive-exception-timeout", 0, Arg::required, "Internet connectivity",
         "with --kill-switch: let a captive portal's login (DNS, TCP 80/443) through for SECONDS (1-3600; the GP "
         "portal config's captive-portal-exception-timeout, else 300)",
         SET_INT(captive_exception_timeout_s, "captive-exception-timeout", 1, 3600)},
        {"dry-run", 0, Arg::none, "Authentication (two-phase)",
         "log in, print the tunnel configuration, log out: no tun device, no traffic", SET_FLAG(dry_run)},

        // Logging
        {"verbose", 'v', Arg::none, "Logging (two-phase)", "more output (repeat for debug, trace)",
         [](ClientOptions& o, const char*) -> Status { o.verbosity = std::min(o.verbosity + 1, 3); return {}; }},
        {"quiet", 'q', Arg::none, "Logging (two-phase)", "errors only",
         [](ClientOptions& o, const char*) -> Status { o.verbosity = 0; return {}; }},
        {"timestamp", 0, Arg::none, "Logging (two-phase)", "prefix each line with a timestamp", SET_FLAG(timestamp)},
        {"syslog", 'l', Arg::none, "Logging (two-phase)", "log to syslog", SET_FLAG(syslog)},
        {"dump-http-traffic", 0, Arg::none, "Logging (two-phase)", "log HTTP requests and responses (secrets redacted)",
         [](ClientOptions& o, const char*) -> Status {
             o.dump_http_traffic = true;
             o.verbosity = std::max(o.verbosity, 2);
             return {};
         }},

        // Authentication
        {"user", 'u', Arg::required, "Authentication", "set login username", SET_STRING(user)},
        {"passwd-on-stdin", 0, Arg::none, "Authentication", "read password from standard input",
         SET_FLAG(passwd_on_stdin)},
        {"non-inter", 0, Arg::none, "Authentication", "do not expect user input; fail if it is needed",
         SET_FLAG(non_interactive)},
        {"no-passwd", 0, Arg::none, "Authentication", "fail if a password is asked for", SET_FLAG(no_passwd)},
        {"prompt-fd", 0, Arg::required, "Authentication",
         "ask login prompts as records on file descriptor N, for a program (see espvpn(8))",
         SET_INT(prompt_fd, "prompt-fd", 3, 65535)},
        {"authgroup", 0, Arg::required, "Authentication",
         "choose the gateway (GlobalProtect) or group (AnyConnect) by name", SET_STRING(authgroup)},
        {"usergroup", 'g', Arg::required, "Authentication",
         "GlobalProtect: portal or gateway; AnyConnect: URL path", SET_STRING(usergroup)},
        {"sso-browser", 0, Arg::required, "Authentication",
         "single sign-on in a browser espvpn starts and watches (Chromium/Chrome: program and arguments)",
         [](ClientOptions& o, const char* v) -> Status {
             if (std::string_view(v).find_first_not_of(" \t") == std::string_view::npos)
                 return make_error("--sso-browser: give the browser command, e.g. --sso-browser=chromium");
             o.sso_browser = v;
             return {};
         }},
        {"form-entry", 'F', Arg::required, "Authentication", "pre-fill form field: FORM:OPT=VALUE",
         [](ClientOptions& o, const char* v) -> Status {
             std::string e = v;
             if (e.find(':') == std::string::npos || e.find('=') == std::string::npos)
                 return make_error("--form-entry: expected FORM:OPT=VALUE, got '" + e + "'");
             o.form_entries.push_back(e);
             return {};
         }},
        {"cookie", 'C', Arg::required, "Authentication (two-phase)", "use this cookie instead of logging in",
         [](ClientOptions& o, const char* v) -> Status { o.cookie = Secret::from_string(v); return {}; }},
        {"cookie-on-stdin", 0, Arg::none, "Authentication (two-phase)", "read the cookie from standard input",
         SET_FLAG(cookie_on_stdin)},
        {"external-browser", 0, Arg::optional, "Authentication",
         "single sign-on in the user's browser: xdg-open, or PROGRAM given the URL (docs/SSO.md)",
         [](ClientOptions& o, const char* v) -> Status {
             o.external_browser = true;
             o.external_program = v;
             return {};
         }},
        {"sso-timeout", 0, Arg::required, "Authentication", "give up a single sign-on after SECONDS (300)",
         SET_INT(sso_timeout_s, "sso-timeout", 1, 86400)},
        {"sso-callback", 0, Arg::required, "Authentication",
         "hand a globalprotectcallback: URL to the espvpn login waiting for it (the scheme handler)",
         [](ClientOptions& o, const char* v) -> Status {
             o.action = Action::sso_callback;
             o.sso_callback = Secret::from_string(v);
             return {};
         }},
        {"no-cookie-cache", 0, Arg::none, "Authentication",
         "GlobalProtect: neither use nor save the portal's authentication cookie across runs",
         SET_FLAG(no_cookie_cache)},
        {"no-internal-detection", 0, Arg::none, "Authentication",
         "GlobalProtect: skip the portal's internal host detection; use its external gateways",
         SET_FLAG(no_internal_detection)},
        {"forget-cookies", 0, Arg::optional, "Authentication",
         "remove the saved GlobalProtect portal cookie of PORTAL (every portal when none is given), exit",
         [](ClientOptions& o, const char* v) -> Status {
             o.action = Action::forget_cookies;
             o.forget_portal = v;
             return {};
         }},
        {"authenticate", 0, Arg::none, "Authentication (two-phase)",
         "log in, print COOKIE/HOST/CONNECT_URL/FINGERPRINT/RESOLVE, exit", SET_ACTION(authenticate)},
        {"cookieonly", 0, Arg::none, "Authentication (two-phase)", "log in, print the cookie, exit", SET_ACTION(cookie_only)},
        {"printcookie", 0, Arg::none, "Authentication (two-phase)", "print the cookie before connecting",
         SET_FLAG(print_cookie)},
        {"os", 0, Arg::required, "Local system information",
         "OS to report: linux, linux-64, win, mac-intel, android, apple-ios",
         [](ClientOptions& o, const char* v) -> Status {
             std::string os = v;
             for (const char* ok : {"linux", "linux-64", "win", "mac-intel", "android", "apple-ios"})
                 if (os == ok) { o.os = os; return {}; }
             return make_error("--os: unknown OS '" + os + "'");
         }},
        {"csd-wrapper", 0, Arg::required, "Trojan binary (CSD) execution", "program that writes the HIP report",
         SET_STRING(csd_wrapper)},
        {"hip-wrapper", 0, Arg::required, "Trojan binary (CSD) execution", nullptr, SET_STRING(csd_wrapper)},
        {"csd-user", 0, Arg::required, "Trojan binary (CSD) execution", "run the HIP program as USER", SET_STRING(csd_user)},
        {"force-trojan", 0, Arg::required, "Trojan binary (CSD) execution",
         "GlobalProtect: run the HIP check every SECONDS (default: the portal's interval, else 3600)",
         SET_INT(force_trojan_s, "force-trojan", 0, 86400 * 7)},
        {"token-mode", 0, Arg::required, "Authentication", "software token type: totp or hotp (with --token-secret)",
         [](ClientOptions& o, const char* v) -> Status {
             std::string m = v;
             for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
             if (m == "totp" || m == "hotp") o.token_mode = m;
             else if (m == "rsa" || m == "stoken" || m == "yubioath" || m == "oidc")
                 return unsupported("token-mode", ("'" + m + "': only totp and hotp are built in (RSA SecurID, "
                                                   "YubiKey OATH and OIDC tokens are not)").c_str());
             else return make_error("--token-mode: '" + m + "' is not a software token type (totp, hotp)");
             return {};
         }},
        {"token-secret", 0, Arg::required, "Authentication", "the token's key: base32:KEY, 0xHEX, raw, or @FILE",
         [](ClientOptions& o, const char* v) -> Status { o.token_secret = Secret::from_string(v); return {}; }},
        {"gateway-select", 0, Arg::required, "Authentication",
         "priority (default) or latency: pick the portal's fastest gateway",
         [](ClientOptions& o, const char* v) -> Status {
             std::string s = v;
             if (s == "latency") o.gateway_by_latency = true;
             else if (s == "priority") o.gateway_by_latency = false;
             else return make_error("--gateway-select: expected priority or latency, got '" + s + "'");
             return {};
         }},
        {"useragent", 0, Arg::required, "Local system information", "HTTP User-Agent", SET_STRING(useragent)},
        {"version-string", 0, Arg::required, "Local system information", "client version to report",
         SET_STRING(version_string)},
        {"local-hostname", 0, Arg::required, "Local system information", "host name to report", SET_STRING(local_hostname)},
        {"http-timeout", 0, Arg::required, "Internet connectivity",
         "give up on a login request after SECONDS without progress (30; espvpn extension)",
         SET_INT(http_timeout_s, "http-timeout", 1, 3600)},
        {"no-http-keepalive", 0, Arg::none, "Server bugs", "new TLS connection per request (slow; for broken servers)",
         SET_FLAG(no_http_keepalive)},

        // Certificates
        {"servercert", 0, Arg::required, "Server validation",
         "accept only this server key (pin-sha256:BASE64, sha256:HEX, ...); repeatable",
         [](ClientOptions& o, const char* v) -> Status { o.servercert.emplace_back(v); return {}; }},
        {"cafile", 0, Arg::required, "Server validation", "extra trusted CA certificates", SET_STRING(cafile)},
        {"no-system-trust", 0, Arg::none, "Server validation", "do not trust the system's CAs",
         SET_FLAG(no_system_trust)},
        {"resolve", 0, Arg::required, "Internet connectivity", "use IP for HOST: HOST:IP",
         [](ClientOptions& o, const char* v) -> Status {
             std::string r = v;
             if (r.find(':') == std::string::npos || r.front() == ':' || r.back() == ':')
                 return make_error("--resolve: expected HOST:IP, got '" + r + "'");
             o.resolve.push_back(r);
             return {};
         }},
        {"certificate", 'c', Arg::required, "Authentication", "client certificate (PEM or PKCS#12)",
         SET_STRING(certificate)},
        {"sslkey", 'k', Arg::required, "Authentication", "client private key (default: the certificate file)",
         SET_STRING(sslkey)},
        {"key-password", 'p', Arg::required, "Authentication", "key or PKCS#12 password",
         [](ClientOptions& o, const char* v) -> Status { o.key_password = Secret::from_string(v); return {}; }},
        {"no-cert-check", 0, Arg::none, "Server validation", nullptr,
         [](ClientOptions&, const char*) -> Status {
             return make_error("--no-cert-check was insecure and is not supported; use --servercert");
         }},

        // Networking
        {"script", 's', Arg::required, "VPN configuration script", "vpnc-script command line", SET_STRING(script)},
        {"interface", 'i', Arg::required, "VPN configuration script", "tun device name (may be a persistent tun)",
         [](ClientOptions& o, const char* v) -> Status {
             if (std::strlen(v) == 0 || std::strlen(v) >= 16)
                 return make_error(std::string("--interface: '") + v + "' is not a valid interface name");
             o.interface_name = v;
             return {};
         }},
        {"disable-ipv6", 0, Arg::none, "Tunnel control", "do not ask for IPv6", SET_FLAG(disable_ipv6)},
        {"no-dtls", 0, Arg::none, "Tunnel control", "no UDP tunnel (ESP/DTLS): HTTPS/TLS only", SET_FLAG(no_dtls)},
        {"no-esp", 0, Arg::none, "Tunnel control", nullptr, SET_FLAG(no_dtls)},
        {"dtls-local-port", 0, Arg::required, "Internet connectivity", "local UDP port for ESP/DTLS",
         SET_INT(dtls_local_port, "dtls-local-port", 1, 65535)},
        {"reconnect-timeout", 0, Arg::required, "Internet connectivity", "give up reconnecting after SECONDS (300)",
         SET_INT(reconnect_timeout_s, "reconnect-timeout", 0, 86400 * 7)},
        {"force-dpd", 0, Arg::required, "Tunnel control", "dead peer detection interval in SECONDS",
         SET_INT(force_dpd_s, "force-dpd", 1, 3600)},
        {"esp-retry-interval", 0, Arg::required, "Tunnel control",
         "on the HTTPS/CSTP fallback, try ESP/DTLS again every SECONDS (60; 0 = never; espvpn extension)",
         SET_INT(esp_retry_interval_s, "esp-retry-interval", 0, 86400)},
        {"mtu", 'm', Arg::required, "Tunnel control", "tunnel MTU", SET_INT(mtu, "mtu", 576, 65535)},
        {"base-mtu", 0, Arg::required, "Tunnel control", "path MTU to the server", SET_INT(base_mtu, "base-mtu", 576, 65535)},
        {"kill-switch", 0, Arg::none, "Tunnel control",
         "while connected, block IP traffic outside the tunnel (nftables); kept while reconnecting",
         SET_FLAG(kill_switch)},
        {"allow-lan", 0, Arg::optional, "Tunnel control",
         "with --kill-switch: also allow these prefixes (comma-separated; none given: the attached networks)",
         [](ClientOptions& o, const char* v) -> Status {
             std::string list = v;
             if (list.empty()) {
                 o.allow_lan.emplace_back("attached");
                 return {};
             }
             std::size_t start = 0;
             while (start <= list.size()) {
                 std::size_t comma = std::min(list.find(',', start), list.size());
                 std::string item = list.substr(start, comma - start);
                 if (auto p = IpPrefix::parse(item); !p)
                     return make_error("--allow-lan: '" + item + "': " + p.error().message);
                 o.allow_lan.push_back(item);
                 start = comma + 1;
             }
             return {};
         }},
        {"queue-len", 'Q', Arg::required, "Tunnel control", "packet queue length (the tun's txqueuelen)", SET_INT(queue_len, "queue-len", 1, 4096)},

        // Proxies (issue 17): HTTP CONNECT and SOCKS5; the environment only with --libproxy.
        {"proxy", 'P', Arg::required, "Internet connectivity",
         "HTTP or SOCKS5 proxy: http://[USER:PASS@]HOST[:PORT]/ or socks5://...",
         [](ClientOptions& o, const char* v) -> Status {
             auto spec = proxy::parse_proxy_url(v);
             if (!spec) return make_error("--proxy: " + spec.error().message);
             o.proxy = Secret::from_string(v);
             o.libproxy = false;
             return {};
         }},
        {"proxy-auth", 0, Arg::required, "Internet connectivity",
         "proxy authentication methods (espvpn: Basic, NTLM)",
         [](ClientOptions& o, const char* v) -> Status {
             auto m = proxy::parse_proxy_auth(v);
             if (!m) return m.error();
             if (!m->basic && !m->ntlm && !m->unsupported.empty())
                 return make_error("--proxy-auth: espvpn answers Basic and NTLM proxy authentication, not " +
                                   m->unsupported.front() +
                                   (m->unsupported.front() == "digest"
                                        ? ""
                                        : " (GSSAPI/Negotiate needs a Kerberos realm; give the user and password "
                                          "for NTLM instead)"));
             if (!m->unsupported.empty())
                 o.no_op_notes.push_back("--proxy-auth: espvpn answers Basic and NTLM; not " + m->unsupported.front() +
                                         (m->unsupported.size() > 1 ? " and the rest" : ""));
             o.proxy_auth = v;
             return {};
         }},
        // The last of --proxy, --no-proxy and --libproxy wins.
        {"no-proxy", 0, Arg::none, "Internet connectivity", "no proxy (and not the environment's)",
         [](ClientOptions& o, const char*) -> Status { return o.proxy.clear(), o.libproxy = false, Status{}; }},
        {"libproxy", 0, Arg::none, "Internet connectivity", "take the proxy from https_proxy/all_proxy/no_proxy",
         [](ClientOptions& o, const char*) -> Status { return o.proxy.clear(), o.libproxy = true, Status{}; }},

        // Other openconnect options (issue 17): implemented, logged no-ops, or refused saying why.
        {"pfs", 0, Arg::none, "Tunnel control", "require perfect forward secrecy (no RSA key exchange)", SET_FLAG(pfs)},
        {"dtls-ciphers", 0, Arg::required, "Tunnel control", "AnyConnect: X-DTLS-CipherSuite list to offer",
         SET_STRING(dtls_ciphers)},
        {"dtls12-ciphers", 0, Arg::required, "Tunnel control", "AnyConnect: X-DTLS12-CipherSuite list to offer",
         SET_STRING(dtls12_ciphers)},
        {"gnutls-debug", 0, Arg::required, "Logging (two-phase)", "GnuTLS debug level (0-99) to the log",
         SET_INT(gnutls_debug, "gnutls-debug", 0, 99)},
        {"cert-expire-warning", 'e', Arg::required, "Authentication",
         "warn when the client certificate expires within DAYS (60)",
         SET_INT(cert_expire_warning_days, "cert-expire-warning", 0, 36500)},
        {"key-password-from-fsid", 0, Arg::none, "Authentication", "key pass phrase is the file system ID of the key",
         SET_FLAG(key_password_from_fsid)},
        {"no-xmlpost", 0, Arg::none, "Server bugs", nullptr, SET_FLAG(no_xmlpost)},  // checked with the protocol
        {"no-deflate", 'D', Arg::none, "Tunnel control", nullptr, no_op("no-deflate", "espvpn never compresses")},
        {"compression", 0, Arg::required, "Tunnel control", nullptr,
         [](ClientOptions& o, const char* v) -> Status {
             std::string m = v;
             if (m == "none") return no_op("compression=none", "espvpn never compresses")(o, v);
             if (m == "stateless" || m == "all")
                 return unsupported("compression", "espvpn does not compress tunnel traffic (it runs as "
                                                   "--compression=none); drop the option");
             return make_error("--compression: expected none, stateless or all, got '" + m + "'");
         }},
        refused("deflate", 'd', Arg::none, "Tunnel control",
                "espvpn does not compress tunnel traffic (it runs as -D/--no-deflate)"),
        refused("passtos", 0, Arg::none, "Internet connectivity",
                "espvpn sends ESP/DTLS packets with TOS/TCLASS 0, never the inner packet's"),
        refused("allow-insecure-crypto", 0, Arg::none, "Server bugs",
                "espvpn has no 3DES, RC4 or SHA-1-signature support; the server must offer TLS 1.2+ with modern "
                "ciphers"),
        refused("http-auth", 0, Arg::required, "Authentication",
                "espvpn does not answer HTTP 401 authentication from the VPN server (form logins only)"),
        {"mca-certificate", 0, Arg::required, "Multiple certificate authentication (MCA)",
         "AnyConnect: the second (user) certificate, PEM or PKCS#12", SET_STRING(mca_certificate)},
        {"mca-key", 0, Arg::required, "Multiple certificate authentication (MCA)",
         "its private key (default: the MCA certificate file)", SET_STRING(mca_key)},
        {"mca-key-password", 0, Arg::required, "Multiple certificate authentication (MCA)",
         "pass phrase of the MCA key or PKCS#12 file",
         [](ClientOptions& o, const char* v) -> Status { o.mca_key_password = Secret::from_string(v); return {}; }},
        refused("juniper", 0, Arg::none, "Set VPN protocol",
                "espvpn speaks --protocol=gp and --protocol=anyconnect only"),

        // Recognised openconnect options espvpn does not implement: a clear error, never silence.
        refused("script-tun", 'S', Arg::none, "VPN configuration script", "a tun device is required"),
        refused("xmlconfig", 'x', Arg::required, "Tunnel control", "no Cisco XML profiles"),
    };
    return table;
}

#undef SET_STRING
#undef SET_FLAG
#undef SET_ACTION
#undef SET_INT

// Replaces every --config FILE with the options the file holds ("name value" or
// "name=value" per line, without dashes; '#' starts a comment), as openconnect does.
Result<std::vector<std::string>> expand_config(const std::vector<std::string>& args, int depth = 0) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string file;
        if (args[i] == "--config") {
            if (i + 1 >= args.size()) return make_error("--config needs a file name");
            file = args[++i];
        } else if (args[i].rfind("--config=", 0) == 0) {
            file = args[i].substr(9);
        } else {
            out.push_back(args[i]);
            continue;
        }
        if (depth > 4) return make_error("--config files nest too deeply");
        std::ifstream in(file);
        if (!in) return make_error("--config: cannot read '" + file + "'");
        std::vector<std::string> from_file;
        std::string line;
        while (std::getline(in, line)) {
            auto b = line.find_first_not_of(" \t");
            if (b == std::string::npos || line[b] == '#') continue;
            line = line.substr(b);
            while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
                line.pop_back();
            auto sep = line.find_first_of(" \t=");
            if (sep == std::string::npos) {
                from_file.push_back("--" + line);
            } else {
                auto v = line.find_first_not_of(" \t=", sep);
                from_file.push_back("--" + line.substr(0, sep) + "=" +
                                    (v == std::string::npos ? "" : line.substr(v)));
            }
        }
        auto nested = expand_config(from_file, depth + 1);
        if (!nested) return nested.error();
        out.insert(out.end(), nested->begin(), nested->end());
    }
    return out;
}

// The options whose values are secrets: wiped from the real argv (/proc/PID/cmdline) once
// copied. -F/--form-entry FORM:OPT=VALUE loses VALUE only (the form and field stay readable).
bool is_secret_option(std::string_view name) {
    for (std::string_view s : {"cookie", "key-password", "mca-key-password", "token-secret", "sso-callback", "form-entry"})
        if (name == s) return true;
    return false;
}

// Overwrites the secret values (is_secret_option; -C, -p, -F; --proxy's password; a PIN in a
// pkcs11: URI) in the real argv, as getopt_long would read them: "--name VALUE", "--name=VALUE", a unique abbreviation
// ("--cook=VALUE"), "-CVALUE", "-C VALUE" and short clusters ("-vF VALUE").
void scrub_secrets(int argc, char** argv) {
    const auto& table = option_table();
    auto wipe = [](char* s, bool form_entry) {
        if (form_entry) {
            if (char* eq = std::strchr(s, '=')) s = eq + 1;
        }
        explicit_bzero(s, std::strlen(s));
    };
    // The option a long argument names: exact, else the only one it abbreviates.
    auto long_option = [&](std::string_view name) -> const OptionSpec* {
        const OptionSpec* found = nullptr;
        for (const auto& spec : table) {
            std::string_view n = spec.name;
            if (n == name) return &spec;
            if (n.substr(0, name.size()) == name) {
                if (found) return nullptr;  // ambiguous: getopt refuses it
                found = &spec;
            }
        }
        return found;
    };
    auto short_option = [&](char c) -> const OptionSpec* {
        for (const auto& spec : table)
            if (spec.short_name == c) return &spec;
        return nullptr;
    };
    auto scrub_proxy = [](char* url) {  // --proxy http://user:PASS@host/: only the password goes
        char* at = std::strrchr(url, '@');
        char* scheme = std::strstr(url, "://");
        char* user = scheme && (!at || scheme < at) ? scheme + 3 : url;
        char* colon = at ? static_cast<char*>(std::memchr(user, ':', static_cast<std::size_t>(at - user))) : nullptr;
        if (colon) std::memset(colon + 1, '*', static_cast<std::size_t>(at - colon - 1));
    };
    for (int i = 1; i < argc; ++i) {
        char* a = argv[i];
        if (std::strcmp(a, "--") == 0) break;
        if (a[0] != '-' || a[1] == '\0') continue;
        const OptionSpec* spec = nullptr;
        char* value = nullptr;  // in this argument, or the next one when it is null
        if (a[1] == '-') {
            char* eq = std::strchr(a, '=');
            spec = long_option(std::string_view(a + 2, eq ? static_cast<std::size_t>(eq - a - 2) : std::strlen(a + 2)));
            if (!spec || spec->arg == Arg::none) continue;
            if (eq) value = eq + 1;
            else if (spec->arg == Arg::optional) continue;
        } else {
            // A cluster of short options: the first that takes a value takes the rest (or the next argument).
            for (char* c = a + 1; *c; ++c) {
                const OptionSpec* s = short_option(*c);
                if (!s || s->arg == Arg::none) continue;
                spec = s;
                if (c[1]) value = c + 1;
                break;
            }
            if (!spec) continue;
        }
        if (!value) {
            if (i + 1 >= argc) break;
            value = argv[++i];
        }
        const std::string_view name = spec->name;
        if (is_secret_option(name)) wipe(value, name == "form-entry");
        else if (name == "proxy") scrub_proxy(value);
        // A token's PIN in a pkcs11: URI (-c, -k, --mca-*): "pin-value=1234" shows as "pin-value=****".
        if (char* uri = std::strstr(value, "pkcs11:"))
            for (char* pin = std::strstr(uri, "pin-value="); pin; pin = std::strstr(pin, "pin-value=")) {
                pin += std::strlen("pin-value=");
                const std::size_t n = std::strcspn(pin, "&;");
                std::memset(pin, '*', n);
                pin += n;
            }
    }
}

}  // namespace

Result<ClientOptions> parse_options(int argc, char** argv) {
    std::vector<std::string> raw(argv + 1, argv + argc);
    auto expanded = expand_config(raw);
    scrub_secrets(argc, argv);
    if (!expanded) return expanded.error();

    const auto& table = option_table();
    std::vector<option> longs;
    // Leading ':' reports a missing value as ':'. GNU getopt permutes, so options may
    // follow the server URL (NetworkManager passes them so).
    std::string shorts = ":";
    for (std::size_t i = 0; i < table.size(); ++i) {
        const auto& spec = table[i];
        longs.push_back({spec.name,
                         spec.arg == Arg::required   ? required_argument
                         : spec.arg == Arg::optional ? optional_argument
                                                     : no_argument,
                         nullptr, static_cast<int>(1000 + i)});
        if (spec.short_name) {
            shorts += spec.short_name;
            if (spec.arg == Arg::required) shorts += ':';
        }
    }
    longs.push_back({nullptr, 0, nullptr, 0});

    std::vector<std::string> storage;
    storage.reserve(expanded->size() + 1);
    storage.push_back(argc > 0 ? argv[0] : "espvpn");
    storage.insert(storage.end(), expanded->begin(), expanded->end());
    std::vector<char*> args = exec_array(storage);

    ClientOptions options;
    std::vector<std::string> positionals;
    optind = 0;  // full reset of getopt's state (GNU)
    opterr = 0;
    int nargs = static_cast<int>(args.size()) - 1;
    int c;
    Status status;
    while ((c = getopt_long(nargs, args.data(), shorts.c_str(), longs.data(), nullptr)) != -1) {
        const OptionSpec* spec = nullptr;
        if (c >= 1000) {
            spec = &table[static_cast<std::size_t>(c - 1000)];
        } else if (c == '?' || c == ':') {
            std::string what = optopt ? std::string("-") + static_cast<char>(optopt)
                                      : std::string(args[optind - 1]);
            status = make_error(c == ':' ? "option " + what + " needs a value"
                                         : "unknown option " + what);
            break;
        } else {
            for (const auto& s : table)
                if (s.short_name == c) spec = &s;
        }
        if (!spec) continue;
        Status st = spec->apply(options, optarg ? optarg : "");
        if (!st) {
            status = st;
            break;
        }
    }
    for (int i = optind; i < nargs; ++i) positionals.emplace_back(args[i]);
    for (auto& s : storage) secure_zero(s.data(), s.size());
    if (!status) return status.error();

    if (options.action == Action::forget_cookies) {
        // `--forget-cookies PORTAL` as well as `--forget-cookies=PORTAL`.
        if (positionals.size() + !options.forget_portal.empty() > 1)
            return make_error("--forget-cookies takes one portal (or none: every portal)");
        if (!positionals.empty()) options.forget_portal = positionals[0];
        return options;
    }
    if (options.action != Action::connect && options.action != Action::authenticate &&
        options.action != Action::cookie_only)
        return options;
    if (positionals.size() > 1)
        return make_error("more than one server given: '" + positionals[0] + "' and '" +
                          positionals[1] + "'");
    if (!positionals.empty()) {
        if (!options.server.empty()) return make_error("the server is given twice (--server and argument)");
        options.server = positionals[0];
    }
    if (options.server.empty()) return make_error("no server given");
    if (!options.token_mode.empty() && options.token_secret.empty())
        return make_error("--token-mode=" + options.token_mode + " needs --token-secret (the key, or @FILE)");
    if (options.no_xmlpost && options.protocol == Protocol::anyconnect)
        return make_error("--no-xmlpost is not supported: espvpn logs in to AnyConnect servers with XML POST only");
    if (options.no_xmlpost) options.no_op_notes.emplace_back("--no-xmlpost has no effect: it is for AnyConnect logins");
    if (options.protocol == Protocol::gp && !(options.dtls_ciphers + options.dtls12_ciphers).empty())
        options.no_op_notes.emplace_back("--dtls-ciphers/--dtls12-ciphers have no effect: GlobalProtect uses ESP");
    if (!options.allow_lan.empty() && !options.kill_switch)
        return make_error("--allow-lan needs --kill-switch (without it nothing is blocked)");
    if (options.always_on && (options.cookie_on_stdin || options.background))
        return make_error("--always-on runs until it is told to stop: it cannot take its cookie from standard "
                          "input (--cookie-on-stdin) or detach (-b; run it as a service instead)");
    if (!options.status_socket.empty() && options.background)
        return make_error("--status-socket cannot be combined with -b: its server starts before the login, the "
                          "fork comes after it (run espvpn in the foreground, e.g. as the service espvpn@NAME)");
    if ((!options.status_users.empty() || !options.status_groups.empty()) && options.status_socket.empty())
        return make_error("--status-user/--status-group need --status-socket");
    if (options.cookie_on_stdin && options.passwd_on_stdin)
        return make_error("--cookie-on-stdin and --passwd-on-stdin both want standard input");
    // As openconnect: without a second certificate its key and pass phrase are never read.
    if (options.mca_certificate.empty() && (!options.mca_key.empty() || !options.mca_key_password.empty()))
        options.no_op_notes.emplace_back("--mca-key/--mca-key-password have no effect: no --mca-certificate");
    if (options.protocol == Protocol::gp && !options.mca_certificate.empty())
        options.no_op_notes.emplace_back("--mca-certificate has no effect: multiple-certificate authentication is "
                                         "AnyConnect's");
    return options;
}

// The placeholder shown in --help for an option's value.
const char* metavar(std::string_view name) {
    static const std::pair<const char*, const char*> names[] = {
        {"config", "FILE"}, {"protocol", "PROTO"}, {"server", "URL"}, {"pid-file", "FILE"},
        {"setuid", "USER"}, {"stats-json", "FILE"}, {"status-socket", "PATH"}, {"status-user", "USERS"},
        {"status-group", "GROUPS"}, {"user", "NAME"}, {"authgroup", "GROUP"},
        {"usergroup", "GROUP"}, {"form-entry", "FORM:OPT=VALUE"}, {"cookie", "COOKIE"},
        {"os", "OS"}, {"token-mode", "MODE"}, {"token-secret", "SECRET"}, {"csd-wrapper", "SCRIPT"}, {"csd-user", "USER"}, {"force-trojan", "SECONDS"}, {"gateway-select", "HOW"},
        {"sso-browser", "COMMAND"},
        {"useragent", "STRING"}, {"version-string", "STRING"}, {"local-hostname", "NAME"}, {"http-timeout", "SECONDS"},
        {"servercert", "PIN"}, {"trusted-domain", "DOMAIN"}, {"trusted-server", "HOST:PORT,PIN"}, {"captive-probe", "URL[,EXPECTED]"}, {"captive-exception-timeout", "SECONDS"}, {"cafile", "FILE"}, {"resolve", "HOST:IP"}, {"certificate", "CERT"},
        {"sslkey", "KEY"}, {"key-password", "PASS"}, {"script", "CMD"}, {"interface", "IFNAME"},
        {"dtls-local-port", "PORT"}, {"reconnect-timeout", "SECONDS"}, {"force-dpd", "SECONDS"},
        {"esp-retry-interval", "SECONDS"}, {"mtu", "MTU"}, {"base-mtu", "MTU"}, {"queue-len", "N"}, {"allow-lan", "PREFIXES"},
        {"proxy", "URL"}, {"proxy-auth", "METHODS"}, {"dtls-ciphers", "LIST"}, {"dtls12-ciphers", "LIST"},
        {"gnutls-debug", "LEVEL"}, {"cert-expire-warning", "DAYS"},
        {"external-browser", "PROGRAM"}, {"sso-timeout", "SECONDS"}, {"sso-callback", "URL"}, {"forget-cookies", "PORTAL"},
        {"mca-certificate", "MCACERT"}, {"mca-key", "MCAKEY"}, {"mca-key-password", "MCAPASS"},
    };
    for (const auto& [n, m] : names)
        if (name == n) return m;
    return "VALUE";
}

std::vector<OptionInfo> option_list() {
    std::vector<OptionInfo> out;
    for (const auto& spec : option_table())
        out.push_back({spec.name, spec.short_name, spec.arg == Arg::required, spec.help != nullptr, spec.group});
    return out;
}

std::string usage_text() {
    // openconnect's --help sections, in its order; a group not listed here follows them.
    static const char* const kGroupOrder[] = {
        "General", "Set VPN protocol", "Authentication", "Server validation", "Internet connectivity",
        "Authentication (two-phase)", "Process control", "Logging (two-phase)", "VPN configuration script",
        "Tunnel control", "Local system information", "Trojan binary (CSD) execution", "Server bugs",
    };
    std::vector<std::string> groups(std::begin(kGroupOrder), std::end(kGroupOrder));
    for (const auto& spec : option_table())
        if (spec.help && std::find(groups.begin(), groups.end(), spec.group) == groups.end())
            groups.emplace_back(spec.group);

    std::ostringstream out;
    out << "Usage: espvpn [options] <server>\n\n"
           "A userspace VPN client for GlobalProtect (ESP) and AnyConnect (DTLS) gateways.\n"
           "Options follow openconnect's names and meanings; see espvpn(8).\n";
    for (const auto& group : groups) {
        bool first = true;
        for (const auto& spec : option_table()) {
            if (!spec.help || group != spec.group) continue;
            if (first) out << "\n" << group << ":\n";
            first = false;
            std::string left = "  ";
            left += spec.short_name ? std::string("-") + spec.short_name + ", " : "    ";
            left += std::string("--") + spec.name;
            if (spec.arg == Arg::required) left += std::string("=") + metavar(spec.name);
            if (spec.arg == Arg::optional) left += std::string("[=") + metavar(spec.name) + "]";
            out << left;
            if (left.size() < 32) out << std::string(32 - left.size(), ' ');
            else out << "\n" << std::string(32, ' ');
            out << spec.help << "\n";
        }
    }
    out << "\nSignals: SIGINT/SIGTERM log out and disconnect; SIGHUP disconnects keeping the session;\n"
           "SIGUSR2 reconnects now; SIGUSR1 prints statistics.\n"
           "Exit codes: 0 success or user disconnect, 1 error, 2 cookie or credentials rejected.\n";
    return out.str();
}

}  // namespace espvpn::cli
