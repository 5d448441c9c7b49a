#include <doctest/doctest.h>

#include <algorithm>

#include "src/nm/espvpn_command.h"
#include "tests/unit/src/nm/vpn_settings_fixture.h"

using namespace espvpn;
using namespace espvpn::nm;

namespace {

EspvpnCommand build(const VpnSettings& s, int verbosity = 0) {
    auto cmd = espvpn_command("/usr/sbin/espvpn", "'/usr/lib/nm-espvpn-service' --helper", s, verbosity);
    if (!cmd) FAIL("unexpected error: " << cmd.error().message);
    return std::move(*cmd);
}

std::string error_of(const VpnSettings& s) {
    auto cmd = espvpn_command("/usr/sbin/espvpn", "helper", s, 0);
    REQUIRE_FALSE(cmd);
    return cmd.error().message;
}

bool argv_mentions(const EspvpnCommand& c, const std::string& text) {
    return std::any_of(c.argv.begin(), c.argv.end(),
                       [&](const std::string& a) { return a.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("espvpn command: GlobalProtect with a password") {
    auto s = settings({{"gateway", "https://10.201.0.1:4443/"},
                       {"protocol", "gp"},
                       {"user", "alice"},
                       {"cafile", "/etc/ca.pem"},
                       {"password-flags", "0"}},
                      {{"password", "s3cret-pw"}});
    EspvpnCommand c = build(s, 2);
    CHECK(c.argv == std::vector<std::string>{"/usr/sbin/espvpn", "--protocol=gp", "--user=alice",
                                             "--cafile=/etc/ca.pem", "--passwd-on-stdin",
                                             "--script='/usr/lib/nm-espvpn-service' --helper", "--verbose",
                                             "--verbose", "https://10.201.0.1:4443/"});
    CHECK(c.stdin_line.reveal_text() == "s3cret-pw");
    CHECK_FALSE(argv_mentions(c, "s3cret-pw"));
    CHECK(c.ignored_keys.empty());  // "-flags" items are NM bookkeeping
}

TEST_CASE("espvpn command: AnyConnect with a cookie and NM-openconnect's secret names") {
    // The auth dialog of NM-openconnect returns gateway, gwcert and resolve as secrets.
    auto s = settings({{"gateway", "vpn.example.com"}, {"cacert", "/etc/old-ca.pem"}, {"mtu", "1300"},
                       {"some_future_key", "x"}},
                      {{"cookie", "webvpn=ABC; openconnect_strapkey=XYZ"},
                       {"password", "not-used"},
                       {"gateway", "https://vpn.example.com:8443/"},
                       {"gwcert", "pin-sha256:AAAA"},
                       {"resolve", "vpn.example.com:192.0.2.7"}});
    EspvpnCommand c = build(s);
    CHECK(c.argv == std::vector<std::string>{"/usr/sbin/espvpn", "--protocol=anyconnect", "--mtu=1300",
                                             "--servercert=pin-sha256:AAAA", "--cafile=/etc/old-ca.pem",
                                             "--resolve=vpn.example.com:192.0.2.7", "--cookie-on-stdin",
                                             "--non-inter", "--script='/usr/lib/nm-espvpn-service' --helper",
                                             "https://vpn.example.com:8443/"});
    CHECK(c.stdin_line.reveal_text() == "webvpn=ABC; openconnect_strapkey=XYZ");  // the cookie wins
    CHECK_FALSE(argv_mentions(c, "webvpn"));
    CHECK_FALSE(argv_mentions(c, "not-used"));
    CHECK(c.ignored_keys == std::vector<std::string>{"some_future_key"});
}

TEST_CASE("espvpn command: bad settings are refused with a reason") {
    CHECK(error_of(settings({{"protocol", "gp"}}, {{"password", "x"}})).find("no gateway") != std::string::npos);
    CHECK(error_of(settings({{"gateway", "--script=/tmp/evil"}}, {{"password", "x"}})).find("not a server") !=
          std::string::npos);
    CHECK(error_of(settings({{"gateway", "vpn.test"}, {"protocol", "pulse"}}, {{"password", "x"}}))
              .find("protocol 'pulse'") != std::string::npos);
    CHECK(error_of(settings({{"gateway", "vpn.test"}}, {})).find("neither a 'cookie' nor a 'password'") !=
          std::string::npos);
    CHECK(error_of(settings({{"gateway", "vpn.test"}}, {{"password", "a\nb"}})).find("more than one line") !=
          std::string::npos);
}

TEST_CASE("espvpn command: the profile's proxy item becomes --proxy, as NetworkManager-openconnect passes it") {
    EspvpnCommand c = build(settings({{"gateway", "vpn.test"}, {"proxy", "http://proxy.test:3128/"}}, {{"cookie", "c"}}));
    CHECK(std::count(c.argv.begin(), c.argv.end(), std::string("--proxy=http://proxy.test:3128/")) == 1);
    CHECK(c.ignored_keys.empty());
}

TEST_CASE("espvpn command: a NetworkManager-openconnect profile's auth-dialog items are neither passed nor unknown") {
    // What the NM-openconnect auth dialog leaves in vpn.data (doc B.1) plus a saved form field.
    auto s = settings({{"gateway", "vpn.example.com"}, {"protocol", "anyconnect"}, {"authtype", "password"},
                       {"prevent_invalid_cert", "yes"}, {"enable_csd_trojan", "no"}, {"csd_wrapper", "/x"},
                       {"pem_passphrase_fsid", "no"}, {"stoken_source", "disabled"}, {"stoken_string", ""},
                       {"key_pass", ""}, {"form:main:group_list", "staff"}, {"cookie-flags", "2"},
                       {"formerly_unknown", "1"}},
                      {{"cookie", "webvpn=ABC"}, {"gwcert", "pin-sha256:AAAA"}});
    EspvpnCommand c = build(s);
    CHECK(c.argv == std::vector<std::string>{"/usr/sbin/espvpn", "--protocol=anyconnect",
                                             "--servercert=pin-sha256:AAAA", "--cookie-on-stdin", "--non-inter",
                                             "--script='/usr/lib/nm-espvpn-service' --helper", "vpn.example.com"});
    CHECK(c.ignored_keys == std::vector<std::string>{"formerly_unknown"});
}

TEST_CASE("espvpn command: which secrets count as a login") {
    CHECK(has_login_secret(settings({}, {{"cookie", "c"}})));
    CHECK(has_login_secret(settings({}, {{"password", "p"}})));
    CHECK_FALSE(has_login_secret(settings({}, {{"password", ""}, {"gwcert", "pin-sha256:x"}})));
}

TEST_CASE("espvpn command: a single sign-on profile connects with the dialog's cookie, or says why it cannot") {
    auto sso = settings({{"gateway", "https://vpn/"}, {"protocol", "gp"}, {"external-browser", "yes"},
                         {"sso-timeout", "60"}},
                        {{"cookie", "authcookie=abc&portal=x&user=alice"}});
    EspvpnCommand c = build(sso);
    CHECK(c.ignored_keys.empty());  // the browser keys are the dialog's, not unknown
    for (const auto& a : c.argv) CHECK(a.find("browser") == std::string::npos);  // the service never opens one
    auto none = espvpn_command("/usr/sbin/espvpn", "x", settings({{"gateway", "https://vpn/"}, {"sso-browser", "c"}}, {}), 0);
    REQUIRE_FALSE(none);
    CHECK(none.error().message.find("single sign-on") != std::string::npos);
}

TEST_CASE("espvpn command: an otp=yes profile hands espvpn the one-time code as the line after the password") {
    auto s = settings({{"gateway", "https://gw/"}, {"protocol", "gp"}, {"otp", "yes"}},
                      {{"password", "pw"}, {"otp", "123456"}});
    EspvpnCommand c = build(s);
    CHECK(c.stdin_line.reveal_text() == "pw\n123456");
    CHECK_FALSE(argv_mentions(c, "123456"));
    CHECK(c.ignored_keys.empty());  // "otp" is known
    CHECK(wants_otp(s));
    CHECK_FALSE(wants_otp(settings({{"otp", "no"}}, {})));

    // Without the code there is nothing to answer the challenge with: refused, not started.
    CHECK(error_of(settings({{"gateway", "https://gw/"}, {"otp", "yes"}}, {{"password", "pw"}})).find("one-time code") !=
          std::string::npos);
    // A code with a newline would answer a second prompt: refused.
    CHECK(error_of(settings({{"gateway", "https://gw/"}, {"otp", "yes"}}, {{"password", "pw"}, {"otp", "1\n2"}}))
              .find("more than one line") != std::string::npos);
    CHECK(error_of(settings({{"gateway", "https://gw/"}, {"otp", "yes"}}, {{"password", "p\nw"}, {"otp", "1"}}))
              .find("more than one line") != std::string::npos);
    // A cookie needs no code; without otp=yes a stray otp secret is not passed.
    CHECK(build(settings({{"gateway", "https://gw/"}, {"otp", "yes"}}, {{"cookie", "c"}})).stdin_line.reveal_text() == "c");
    CHECK(build(settings({{"gateway", "https://gw/"}}, {{"password", "pw"}, {"otp", "1"}})).stdin_line.reveal_text() ==
          "pw");
}

TEST_CASE("espvpn command: kill switch and version string become espvpn's options") {
    auto s = settings({{"gateway", "https://vpn.example.com/"},
                       {"kill_switch", "yes"},
                       {"version_string", "6.1.0-33"},
                       {"password-flags", "0"}},
                      {{"password", "pw"}});
    EspvpnCommand c = build(s);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--kill-switch") == 1);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--version-string=6.1.0-33") == 1);
    CHECK(c.ignored_keys.empty());
    // Off: no option; the login of the auth dialog blocks nothing, it reports the version.
    s.data["kill_switch"] = "no";
    CHECK_FALSE(argv_mentions(build(s), "--kill-switch"));
    auto auth = espvpn_authenticate_command("/usr/sbin/espvpn", s, true);
    REQUIRE(auth);
    CHECK(std::count(auth->begin(), auth->end(), "--version-string=6.1.0-33") == 1);
}

TEST_CASE("espvpn command: a TOTP key goes to espvpn through its descriptor 3, never argv") {
    auto s = settings({{"gateway", "https://vpn.example.com/"},
                       {"protocol", "gp"},
                       {"token_mode", "totp"},
                       {"token_secret-flags", "0"},
                       {"password-flags", "0"}},
                      {{"password", "pw"}, {"token_secret", "base32:JBSWY3DPEHPK3PXP"}});
    EspvpnCommand c = build(s);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--token-mode=totp") == 1);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--token-secret=@/dev/fd/3") == 1);
    CHECK_FALSE(argv_mentions(c, "JBSWY3DP"));
    CHECK(c.token_secret.reveal_text() == "base32:JBSWY3DPEHPK3PXP");
    CHECK(c.ignored_keys.empty());
    // No token: nothing for descriptor 3.
    s.data.erase("token_mode");
    EspvpnCommand plain = build(s);
    CHECK(plain.token_secret.empty());
    CHECK_FALSE(argv_mentions(plain, "--token"));
}

TEST_CASE("espvpn command: an HOTP token needs a key file; bad token settings are refused") {
    auto s = settings({{"gateway", "https://vpn.example.com/"}, {"token_mode", "hotp"}},
                      {{"password", "pw"}, {"token_secret", "@/home/alice/.hotp"}});
    EspvpnCommand c = build(s);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--token-secret=@/home/alice/.hotp") == 1);
    CHECK(c.token_secret.empty());
    s.secrets["token_secret"] = Secret::from_string("base32:JBSWY3DPEHPK3PXP,7");
    CHECK(error_of(s).find("HOTP token needs its key in a file") != std::string::npos);
    s.secrets.erase("token_secret");
    CHECK(error_of(s).find("no 'token_secret' secret") != std::string::npos);
    s.data["token_mode"] = "rsa";
    CHECK(error_of(s).find("not supported") != std::string::npos);
}
