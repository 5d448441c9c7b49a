// The espvpn command line: openconnect's option names and meanings where the two
// overlap (see the project's vpnc-script/NetworkManager notes, part C), parsed
// into one ClientOptions value. Options may follow the server URL, as
// NetworkManager passes them.
#pragma once

#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::cli {

enum class Protocol { gp, anyconnect };
enum class Action {
    connect,        // log in (or use a cookie) and run the tunnel
    authenticate,   // --authenticate: print COOKIE=/HOST=/... lines and exit
    cookie_only,    // --cookieonly: print the cookie and exit
    help,
    version,
    self_check,
    sso_callback,   // --sso-callback URL: hand a globalprotectcallback: URL to the waiting login
    forget_cookies, // --forget-cookies [PORTAL]: remove saved GP portal cookies and exit
};

struct ClientOptions {
    Action action = Action::connect;
    std::string server;  // as given: [https://]host[:port][/path]
    Protocol protocol = Protocol::anyconnect;  // openconnect's default

    // Authentication
    std::string user;
    bool passwd_on_stdin = false;
    bool non_interactive = false;
    bool no_passwd = false;
    int prompt_fd = -1;      // --prompt-fd N: prompts as records for a program (channel_prompter.h)
    std::string authgroup;
    std::string usergroup;   // GlobalProtect: portal | gateway; AnyConnect: URL path
    std::vector<std::string> form_entries;  // FORM:OPT=VALUE
    Secret cookie;           // -C/--cookie (scrubbed from argv) or --cookie-on-stdin
    bool cookie_on_stdin = false;
    bool print_cookie = false;
    std::string os = "linux-64";
    std::string csd_wrapper;  // GlobalProtect HIP report program
    std::string csd_user;
    int force_trojan_s = 0;   // --force-trojan: GP HIP check interval (0: the portal's or 3600 s)
    bool gateway_by_latency = false;  // --gateway-select=latency (espvpn extension)
    std::string sso_browser;  // --sso-browser=COMMAND: the driven browser ("" = none)
    std::string token_mode;   // --token-mode: "totp" or "hotp" ("" = none)
    Secret token_secret;      // --token-secret (scrubbed from argv): the key or @FILE
    // Single sign-on (docs/SSO.md)
    bool external_browser = false;    // --external-browser[=PROGRAM] given
    std::string external_program;     // its PROGRAM ("" = xdg-open)
    int sso_timeout_s = 300;          // --sso-timeout
    Secret sso_callback;              // --sso-callback URL (scrubbed from argv)
    // GlobalProtect portal cookies kept across runs (docs/GP-LOGIN.md)
    bool no_cookie_cache = false;     // --no-cookie-cache: neither use nor save one
    bool no_internal_detection = false;  // --no-internal-detection: GP external gateways only
    std::string forget_portal;        // --forget-cookies [PORTAL]: "" = every portal

    // Server and client certificates
    std::vector<std::string> servercert;  // pins; given → system trust is off
    std::string cafile;
    bool no_system_trust = false;
    std::string certificate;
    std::string sslkey;
    Secret key_password;
    // --mca-certificate/--mca-key/--mca-key-password: AnyConnect multiple-certificate authentication
    std::string mca_certificate;
    std::string mca_key;
    Secret mca_key_password;
    std::vector<std::string> resolve;  // HOST:IP

    // Networking
    std::string script;
    std::string interface_name;
    std::string setuid_user;
    bool background = false;
    std::string pid_file;
    bool disable_ipv6 = false;
    bool no_dtls = false;  // GlobalProtect: no ESP, HTTPS tunnel only
    int dtls_local_port = 0;
    int reconnect_timeout_s = 300;
    int force_dpd_s = 0;
    int esp_retry_interval_s = 60;  // GP on the HTTPS fallback: retry ESP this often (espvpn extension)
    int mtu = 0;
    int base_mtu = 0;
    int queue_len = 0;
    bool kill_switch = false;            // --kill-switch (espvpn extension)
    std::vector<std::string> allow_lan;  // --allow-lan prefixes; "attached": the host's networks
    bool no_http_keepalive = false;
    int http_timeout_s = 30;  // connect, each read/write, and a whole response (espvpn extension)
    std::string useragent;
    std::string version_string;
    std::string local_hostname;
    std::string stats_json;  // --stats-json FILE (espvpn extension)
    // The status socket and always-on mode (docs/SERVICE.md; espvpn extensions)
    std::string status_socket;               // --status-socket PATH
    std::vector<std::string> status_users;   // --status-user USER[,USER]
    std::vector<std::string> status_groups;  // --status-group GROUP[,GROUP]
    bool always_on = false;                  // --always-on
    std::vector<std::string> trusted_domains;  // --trusted-domain DOMAIN[,DOMAIN] (with --always-on)
    std::vector<std::string> trusted_servers;  // --trusted-server HOST:PORT,PIN (with --always-on)
    // Captive portals (docs/SERVICE.md): --captive-probe URL[,EXPECTED] ("" = NetworkManager's
    // check), --no-captive-probe, --captive-exception-timeout SECONDS (0 = the portal config's, else 300)
    std::string captive_probe;
    bool no_captive_probe = false;
    int captive_exception_timeout_s = 0;
    bool dry_run = false;    // --dry-run: log in, show the tunnel configuration, log out; no tun

    // openconnect compatibility (issue 17)
    Secret proxy;              // --proxy URL (may hold a password; wiped from argv)
    bool libproxy = false;     // --libproxy: the proxy from https_proxy/all_proxy/no_proxy
    std::string proxy_bypass;  // no_proxy (with --libproxy)
    std::string proxy_auth;    // --proxy-auth METHODS
    bool pfs = false;          // --pfs: no TLS key exchange without forward secrecy
    std::string dtls_ciphers;  // --dtls-ciphers (AnyConnect)
    std::string dtls12_ciphers;
    int gnutls_debug = 0;      // --gnutls-debug LEVEL
    int cert_expire_warning_days = 60;  // -e/--cert-expire-warning
    bool key_password_from_fsid = false;
    bool no_xmlpost = false;
    std::vector<std::string> no_op_notes;  // accepted options that change nothing: logged at debug

    // Logging
    int verbosity = 1;  // openconnect's LOG_LEVEL scale: 0 quiet .. 3 trace
    bool timestamp = false;
    bool syslog = false;
    bool dump_http_traffic = false;
};

// Parses argv. Secrets given on the command line (-C, -p) are moved into Secret
// values and overwritten in argv, so /proc/PID/cmdline no longer shows them.
// stdin is not read here: the caller reads the cookie/password when it needs them.
Result<ClientOptions> parse_options(int argc, char** argv);

// The option table as data, for the man page and completion checks.
struct OptionInfo {
    std::string name;       // long name, without dashes
    char short_name = 0;    // 0: long only
    bool takes_value = false;
    bool listed = false;    // shown by --help (unlisted: compatibility or refusal only)
    std::string group;
};
std::vector<OptionInfo> option_list();

// `espvpn --help`, grouped as openconnect groups its options.
std::string usage_text();

}  // namespace espvpn::cli
