#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "src/cli/options.h"

using namespace espvpn;
using namespace espvpn::cli;

namespace {
// Owns a mutable argv, as main() gets it.
struct Argv {
    std::vector<std::string> store;
    std::vector<char*> ptrs;
    explicit Argv(std::vector<std::string> args) : store(std::move(args)) {
        store.insert(store.begin(), "espvpn");
        for (auto& s : store) ptrs.push_back(s.data());
        ptrs.push_back(nullptr);
    }
    int argc() const { return static_cast<int>(ptrs.size()) - 1; }
    char** argv() { return ptrs.data(); }
    // The argument as the kernel would show it in /proc/PID/cmdline (up to its first NUL).
    std::string shown(int i) const { return std::string(ptrs[i]); }
};

Result<ClientOptions> parse(Argv& a) { return parse_options(a.argc(), a.argv()); }

// `espvpn --config FILE gw.test` with FILE holding `text` (a fresh file, removed after).
Result<ClientOptions> parse_config(const std::string& text) {
    char path[] = "/tmp/espvpn-config-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    std::ofstream(path) << text;
    Argv a({"--config", path, "gw.test"});
    auto o = parse(a);
    unlink(path);
    return o;
}
}  // namespace

TEST_CASE("NetworkManager-openconnect's argv, with options after the server URL") {
    Argv a({"--protocol", "gp", "--servercert", "pin-sha256:AAAA", "--mtu", "1300", "--syslog",
            "--cookie-on-stdin", "--script", "/usr/lib/NetworkManager/nm-openconnect-service-openconnect-helper",
            "--interface", "vpn0", "https://vpn.example.com/", "--resolve", "vpn.example.com:10.201.0.1",
            "--verbose", "--verbose"});
    auto o = parse(a);
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->protocol == Protocol::gp);
    CHECK(o->server == "https://vpn.example.com/");
    CHECK(o->servercert == std::vector<std::string>{"pin-sha256:AAAA"});
    CHECK(o->mtu == 1300);
    CHECK(o->syslog);
    CHECK(o->cookie_on_stdin);
    CHECK(o->interface_name == "vpn0");
    CHECK(o->resolve == std::vector<std::string>{"vpn.example.com:10.201.0.1"});
    CHECK(o->verbosity == 3);
    CHECK(o->action == Action::connect);
}

TEST_CASE("short options, = forms and defaults") {
    Argv a({"-u", "alice", "--passwd-on-stdin", "--usergroup=gateway", "-q", "gw.test"});
    auto o = parse(a);
    REQUIRE(o.ok());
    CHECK(o->user == "alice");
    CHECK(o->passwd_on_stdin);
    CHECK(o->usergroup == "gateway");
    CHECK(o->verbosity == 0);
    CHECK(o->protocol == Protocol::anyconnect);  // openconnect's default
    CHECK(o->reconnect_timeout_s == 300);
}

TEST_CASE("cookies and key passwords on argv are taken out of /proc/PID/cmdline") {
    Argv a({"--cookie", "authcookie=SECRET1", "-pSECRET2", "--key-password=SECRET3", "gw.test"});
    auto o = parse(a);
    REQUIRE(o.ok());
    CHECK(o->cookie.reveal_text() == "authcookie=SECRET1");
    CHECK(o->key_password.reveal_text() == "SECRET3");
    for (int i = 1; i < a.argc(); ++i) {
        CAPTURE(a.shown(i));
        CHECK(a.shown(i).find("SECRET") == std::string::npos);
    }
}

TEST_CASE("a token PIN in a pkcs11: URI is taken out of /proc/PID/cmdline, the option keeps it") {
    Argv a({"-c", "pkcs11:token=t;object=k?pin-value=SECRET1&module-name=m", "--sslkey=pkcs11:token=t;pin-value=SECRET2;object=k",
            "gw.test"});
    auto o = parse(a);
    REQUIRE(o.ok());
    CHECK(o->certificate == "pkcs11:token=t;object=k?pin-value=SECRET1&module-name=m");
    CHECK(o->sslkey == "pkcs11:token=t;pin-value=SECRET2;object=k");
    CHECK(a.shown(2) == "pkcs11:token=t;object=k?pin-value=*******&module-name=m");
    CHECK(a.shown(3) == "--sslkey=pkcs11:token=t;pin-value=*******;object=k");
}

TEST_CASE("bad input gets an error that names the problem") {
    struct Case {
        std::vector<std::string> args;
        const char* expect;
    } cases[] = {
        {{"--mtu", "12", "gw"}, "--mtu"},
        {{"--mtu", "abc", "gw"}, "--mtu"},
        {{"--esp-retry-interval", "-1", "gw"}, "--esp-retry-interval"},
        {{"--protocol", "pulse", "gw"}, "pulse"},
        {{"--bogus", "gw"}, "unknown option --bogus"},
        {{"gw", "--user"}, "needs a value"},
        {{}, "no server"},
        {{"a", "b"}, "more than one server"},
        {{"--proxy", "https://p:3128", "gw"}, "--proxy"},
        {{"--proxy-auth", "gssapi", "gw"}, "Kerberos"},
        {{"--proxy-auth", "digest", "gw"}, "Basic and NTLM"},
        {{"-d", "gw"}, "does not compress"},
        {{"--compression", "all", "gw"}, "does not compress"},
        {{"--compression", "lz4", "gw"}, "--compression"},
        {{"--passtos", "gw"}, "TOS"},
        {{"--no-xmlpost", "gw"}, "XML POST"},
        {{"--sso-timeout", "0", "gw"}, "--sso-timeout"},
        {{"--juniper", "gw"}, "--protocol=gp"},
        {{"--allow-insecure-crypto", "gw"}, "3DES"},
        {{"--http-auth", "Basic", "gw"}, "401"},
        {{"--force-trojan", "-5", "gw"}, "--force-trojan"},
        {{"--no-cert-check", "gw"}, "--servercert"},
        {{"--cookie-on-stdin", "--passwd-on-stdin", "gw"}, "standard input"},
        {{"--resolve", "nocolon", "gw"}, "HOST:IP"},
        {{"--interface", "a-name-far-too-long-for-linux", "gw"}, "--interface"},
        {{"--config", "/nonexistent/espvpn.conf", "gw"}, "cannot read"},
    };
    for (auto& c : cases) {
        Argv a(c.args);
        auto o = parse(a);
        CAPTURE(c.expect);
        REQUIRE_FALSE(o.ok());
        CHECK(o.error().message.find(c.expect) != std::string::npos);
    }
}

TEST_CASE("openconnect's other options: proxies, no-ops and implemented ones") {
    Argv a({"--proxy", "http://alice:s3cret@proxy.test:3128/", "--proxy-auth=basic,ntlm", "-D", "--compression=none",
            "--pfs", "--dtls-ciphers", "PSK-NEGOTIATE", "--dtls12-ciphers=AES128-GCM-SHA256", "--gnutls-debug", "3",
            "-e", "30", "--key-password-from-fsid", "--protocol=gp", "--no-xmlpost", "gw"});
    auto o = parse(a);
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->proxy.reveal_text() == "http://alice:s3cret@proxy.test:3128/");
    CHECK(a.shown(2) == "http://alice:******@proxy.test:3128/");  // the password is gone from /proc/PID/cmdline
    CHECK(o->proxy_auth == "basic,ntlm");
    CHECK(o->pfs);
    CHECK(o->dtls_ciphers == "PSK-NEGOTIATE");
    CHECK(o->dtls12_ciphers == "AES128-GCM-SHA256");
    CHECK(o->gnutls_debug == 3);
    CHECK(o->cert_expire_warning_days == 30);
    CHECK(o->key_password_from_fsid);
    // -D, --compression=none, --no-xmlpost and --dtls-ciphers under gp are logged as no-ops
    // (--proxy-auth's Basic and NTLM are both answered: no note).
    CHECK(o->no_op_notes.size() == 4);

    Argv last({"--proxy=socks5://p.test", "--no-proxy", "--libproxy", "gw"});
    auto l = parse(last);
    REQUIRE(l.ok());
    CHECK(l->proxy.empty());
    CHECK(l->libproxy);
    Argv undone({"--libproxy", "-P", "p.test:8080", "gw"});
    auto u = parse(undone);
    REQUIRE(u.ok());
    CHECK_FALSE(u->libproxy);
    CHECK(u->proxy.reveal_text() == "p.test:8080");
}

TEST_CASE("--config reads long options without dashes") {
    auto o = parse_config("# a comment\nprotocol gp\nuser=bob\n  no-dtls  \nservercert pin-sha256:BBBB\n");
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->protocol == Protocol::gp);
    CHECK(o->user == "bob");
    CHECK(o->no_dtls);
    CHECK(o->servercert.size() == 1);
}

TEST_CASE("help, version and self-check need no server; help lists groups") {
    for (const char* flag : {"--help", "-V", "--self-check"}) {
        Argv a({flag});
        CAPTURE(flag);
        CHECK(parse(a).ok());
    }
    std::string help = usage_text();
    for (const char* s : {"General:", "Authentication:", "Server validation:", "Process control:",
                          "VPN configuration script:", "Logging (two-phase):", "--passwd-on-stdin", "--servercert=PIN",
                          "--cookie-on-stdin", "--authenticate"}) {
        CAPTURE(s);
        CHECK(help.find(s) != std::string::npos);
    }
}

TEST_CASE("GP transport options: --no-dtls, --force-dpd, --esp-retry-interval") {
    Argv a({"--no-dtls", "--force-dpd", "3", "--esp-retry-interval", "0", "gw"});
    auto o = parse(a);
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->no_dtls);
    CHECK(o->force_dpd_s == 3);
    CHECK(o->esp_retry_interval_s == 0);
    Argv b({"gw"});
    CHECK(parse(b)->esp_retry_interval_s == 60);
}

TEST_CASE("--force-trojan: openconnect's HIP interval, 0 for the portal's") {
    Argv a({"--protocol=gp", "--force-trojan=120", "gw"});
    auto o = parse(a);
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->force_trojan_s == 120);
    Argv b({"--force-trojan", "0", "gw"});
    CHECK(parse(b)->force_trojan_s == 0);
    Argv c({"gw"});
    CHECK(parse(c)->force_trojan_s == 0);
}

TEST_CASE("parse_options can run twice in one process (getopt state reset)") {
    Argv a({"-u", "x", "gw1"});
    Argv b({"-u", "y", "gw2"});
    CHECK(parse(a)->user == "x");
    auto o = parse(b);
    REQUIRE(o.ok());
    CHECK(o->user == "y");
    CHECK(o->server == "gw2");
}

TEST_CASE("--no-internal-detection") {
    Argv plain({"--protocol=gp", "vpn.example.com"});
    auto p = parse(plain);
    REQUIRE(p.ok());
    CHECK_FALSE(p->no_internal_detection);
    Argv a({"--protocol=gp", "--no-internal-detection", "vpn.example.com"});
    auto o = parse(a);
    REQUIRE(o.ok());
    CHECK(o->no_internal_detection);
}

TEST_CASE("saved portal cookies: --no-cookie-cache, --forget-cookies [PORTAL]") {
    {
        Argv a({"--protocol=gp", "--no-cookie-cache", "vpn.example.com"});
        auto o = parse(a);
        REQUIRE(o.ok());
        CHECK(o->no_cookie_cache);
        CHECK(o->action == Action::connect);
    }
    for (auto args : {std::vector<std::string>{"--forget-cookies", "vpn.example.com"},
                      std::vector<std::string>{"--forget-cookies=vpn.example.com"}}) {
        Argv a(args);
        auto o = parse(a);
        REQUIRE(o.ok());
        CHECK(o->action == Action::forget_cookies);
        CHECK(o->forget_portal == "vpn.example.com");
    }
    {
        Argv a({"--forget-cookies"});
        auto o = parse(a);
        REQUIRE(o.ok());
        CHECK(o->action == Action::forget_cookies);
        CHECK(o->forget_portal.empty());
    }
    {
        Argv a({"--forget-cookies=a.example", "b.example"});
        CHECK_FALSE(parse(a).ok());
    }
}

TEST_CASE("single sign-on options: --external-browser[=PROGRAM], --sso-timeout, --sso-callback") {
    {
        Argv a({"--protocol=gp", "--external-browser", "vpn.example.com"});
        auto o = parse(a);
        REQUIRE(o.ok());
        CHECK(o->external_browser);
        CHECK(o->external_program.empty());
        CHECK(o->server == "vpn.example.com");
        CHECK(o->sso_timeout_s == 300);
    }
    {
        Argv a({"--protocol=gp", "--external-browser=firefox --private-window", "--sso-timeout", "42", "gw"});
        auto o = parse(a);
        REQUIRE(o.ok());
        CHECK(o->external_program == "firefox --private-window");
        CHECK(o->sso_timeout_s == 42);
    }
    {
        // The handler: no server needed; the URL leaves argv.
        Argv a({"--sso-callback", "globalprotectcallback:c2VjcmV0"});
        auto o = parse(a);
        REQUIRE(o.ok());
        CHECK(o->action == Action::sso_callback);
        CHECK(o->sso_callback.reveal_text() == "globalprotectcallback:c2VjcmV0");
        CHECK(std::string(a.argv()[2]).find("c2VjcmV0") == std::string::npos);
    }
}

TEST_CASE("--always-on, --kill-switch and --status-socket with --setuid: the privilege split runs them") {
    Argv a({"--always-on", "--kill-switch", "--status-socket", "/run/espvpn/x.sock", "-U", "nobody", "gw.test"});
    auto o = parse(a);
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->always_on);
    CHECK(o->kill_switch);
    CHECK(o->setuid_user == "nobody");
    // Still refused: -b with --always-on, -b with the status socket.
    Argv b({"--always-on", "-b", "gw.test"});
    CHECK_FALSE(parse(b).ok());
    Argv c({"--status-socket", "/run/espvpn/x.sock", "-b", "gw.test"});
    CHECK_FALSE(parse(c).ok());
}

TEST_CASE("captive portals: --captive-probe URL[,EXPECTED], --no-captive-probe, --captive-exception-timeout") {
    Argv a({"--captive-probe", "http://192.0.2.80/check.txt,It works", "--captive-exception-timeout", "3", "gw.test"});
    auto o = parse(a);
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    CHECK(o->captive_probe == "http://192.0.2.80/check.txt,It works");
    CHECK(o->captive_exception_timeout_s == 3);
    CHECK_FALSE(o->no_captive_probe);
    Argv n({"--no-captive-probe", "gw.test"});
    CHECK(parse(n)->no_captive_probe);
    for (std::vector<std::string> bad : {std::vector<std::string>{"--captive-probe", "https://portal.example/"},
                                         {"--captive-probe", "http://a b/"},
                                         {"--captive-exception-timeout", "0"},
                                         {"--captive-exception-timeout", "3601"}}) {
        bad.push_back("gw.test");
        Argv b(bad);
        auto r = parse(b);
        CHECK_MESSAGE(!r.ok(), std::string(bad[0] + " " + bad[1]));
        if (!r.ok()) CHECK(r.error().message.find("captive") != std::string::npos);
    }
    // and in a profile, as the service reads it
    auto p = parse_config("captive-probe http://192.0.2.80/\ncaptive-exception-timeout=120\n");
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    CHECK(p->captive_probe == "http://192.0.2.80/");
    CHECK(p->captive_exception_timeout_s == 120);
}
