#include <doctest/doctest.h>

#include <glib.h>

#include <algorithm>

#include "src/nm/auth_dialog.h"
#include "tests/unit/src/nm/vpn_settings_fixture.h"

using namespace espvpn;
using namespace espvpn::nm;

TEST_CASE("auth dialog: the password is asked unless a cookie is there or it is not required") {
    auto none = secrets_to_ask(settings({{"gateway", "https://vpn/"}}, {}), false);
    REQUIRE(none.size() == 1);
    CHECK(none[0].key == "password");
    CHECK(none[0].should_ask);

    // Present, no new one requested: listed, not asked; with -r asked again.
    auto have = secrets_to_ask(settings({}, {{"password", "x"}}), false);
    REQUIRE(have.size() == 1);
    CHECK_FALSE(have[0].should_ask);
    CHECK(secrets_to_ask(settings({}, {{"password", "x"}}), true).at(0).should_ask);

    // A cookie the service can use: nothing to ask, unless new secrets are requested.
    CHECK(secrets_to_ask(settings({}, {{"cookie", "c"}}), false).empty());
    CHECK(secrets_to_ask(settings({}, {{"cookie", "c"}}), true).size() == 1);

    // password-flags 4 = NM_SETTING_SECRET_FLAG_NOT_REQUIRED; 1 (agent-owned) and 2
    // (not saved) are asked like 0.
    CHECK(secrets_to_ask(settings({{"password-flags", "4"}}, {}), true).empty());
    CHECK(secrets_to_ask(settings({{"password-flags", "2"}}, {}), false).at(0).should_ask);
    CHECK(secrets_to_ask(settings({{"password-flags", "1"}}, {}), false).at(0).should_ask);
    CHECK(secret_flags(settings({{"password-flags", "junk"}}, {}), "password") == 0);
}

TEST_CASE("auth dialog: the external-UI reply is the key file nmcli and GNOME Shell read") {
    auto s = settings({{"gateway", "https://vpn.example.com/"}, {"user", "alice"}}, {{"password", "hunter2"}});
    const std::string text = external_ui_reply("work [1]", s, secrets_to_ask(s, true));
    GKeyFile* kf = g_key_file_new();
    REQUIRE(g_key_file_load_from_data(kf, text.data(), text.size(), G_KEY_FILE_NONE, nullptr));
    gchar** groups = g_key_file_get_groups(kf, nullptr);
    CHECK(std::string(groups[0]) == "VPN Plugin UI");  // nmcli wants it first
    CHECK(std::string(groups[1]) == "password");
    g_strfreev(groups);
    gchar* title = g_key_file_get_string(kf, "VPN Plugin UI", "Title", nullptr);
    gchar* description = g_key_file_get_string(kf, "VPN Plugin UI", "Description", nullptr);
    CHECK(std::string(title) == "Authenticate VPN work [1]");
    CHECK(std::string(description).find("https://vpn.example.com/ as alice") != std::string::npos);
    g_free(title);
    g_free(description);
    CHECK(g_key_file_get_boolean(kf, "password", "IsSecret", nullptr));
    CHECK(g_key_file_get_boolean(kf, "password", "ShouldAsk", nullptr));
    g_key_file_free(kf);
    CHECK(text.find("hunter2") == std::string::npos);  // a known secret is never echoed
}

TEST_CASE("auth dialog: espvpn --authenticate output becomes the service's secrets") {
    auto out = secrets_from_authenticate(
        "COOKIE='openconnect_strapkey=abc; webvpn=XYZ='\n"
        "HOST='10.0.0.1'\n"
        "CONNECT_URL='https://vpn.example.com:4443/'\n"
        "FINGERPRINT='pin-sha256:AAAA='\n"
        "RESOLVE='vpn.example.com:10.0.0.1'\n");
    REQUIRE(out);
    CHECK(out->at("cookie").reveal_text() == "openconnect_strapkey=abc; webvpn=XYZ=");
    CHECK(out->at("gateway").reveal_text() == "https://vpn.example.com:4443/");
    CHECK(out->at("gwcert").reveal_text() == "pin-sha256:AAAA=");
    CHECK(out->at("resolve").reveal_text() == "vpn.example.com:10.0.0.1");
    CHECK(out->count("HOST") == 0);

    // The host already is the address: no resolve; no cookie: an error.
    auto ip = secrets_from_authenticate("COOKIE='c'\nRESOLVE='10.0.0.1:10.0.0.1'\nFINGERPRINT=''\n");
    REQUIRE(ip);
    CHECK(ip->count("resolve") == 0);
    CHECK(ip->count("gwcert") == 0);
    // A ' inside a value, as espvpn's shell quoting writes it.
    auto quote = secrets_from_authenticate("COOKIE='user=o'\\''brien&x=1'\n");
    REQUIRE(quote);
    CHECK(quote->at("cookie").reveal_text() == "user=o'brien&x=1");
    CHECK_FALSE(secrets_from_authenticate("COOKIE='unterminated\n"));
    CHECK_FALSE(secrets_from_authenticate("HOST='10.0.0.1'\n"));
    CHECK_FALSE(secrets_from_authenticate(""));
    // GlobalProtect inside the corporate network, no internal gateway: the reason, not "no COOKIE".
    auto inside = secrets_from_authenticate("NO_TUNNEL='no tunnel is needed: this host is inside'\n");
    REQUIRE_FALSE(inside);
    CHECK(inside.error().message == "no tunnel is needed: this host is inside");
}

TEST_CASE("auth dialog: the classic reply is key/value lines ending with an empty pair") {
    std::map<std::string, Secret> secrets;
    secrets["cookie"] = Secret::from_string("c=1");
    secrets["gateway"] = Secret::from_string("https://h/");
    auto reply = classic_reply(secrets);
    REQUIRE(reply);
    CHECK(reply->reveal_text() == "cookie\nc=1\ngateway\nhttps://h/\n\n\n");
    secrets["gwcert"] = Secret::from_string("two\nlines");
    CHECK_FALSE(classic_reply(secrets));
}

TEST_CASE("auth dialog: espvpn --authenticate gets the profile's options, never a secret") {
    auto s = settings({{"gateway", "https://vpn/"}, {"protocol", "gp"}, {"user", "alice"}, {"cafile", "/ca.pem"},
                       {"usergroup", "portal"}},
                      {{"password", "hunter2"}, {"gateway", "https://old/"}, {"gwcert", "pin-sha256:old"}});
    auto argv = espvpn_authenticate_command("/usr/sbin/espvpn", s, true);
    REQUIRE(argv);
    const std::vector<std::string> want{"/usr/sbin/espvpn", "--protocol=gp",   "--user=alice",   "--usergroup=portal",
                                        "--cafile=/ca.pem",  "--passwd-on-stdin", "--authenticate", "https://vpn/"};
    CHECK(*argv == want);
    auto tty = espvpn_authenticate_command("/usr/sbin/espvpn", s, false);
    REQUIRE(tty);
    CHECK(std::find(tty->begin(), tty->end(), "--passwd-on-stdin") == tty->end());
    CHECK_FALSE(espvpn_authenticate_command("/usr/sbin/espvpn", settings({{"protocol", "gp"}}, {}), true));
}

TEST_CASE("auth dialog: a single sign-on profile logs in through the browser, asking nothing") {
    auto s = settings({{"gateway", "https://vpn/"}, {"protocol", "gp"}, {"external-browser", "yes"},
                       {"sso-timeout", "120"}},
                      {});
    CHECK(is_sso_profile(s));
    CHECK(secrets_to_ask(s, false).empty());
    CHECK(secrets_to_ask(s, true).empty());
    // A stored password still counts (an IdP form espvpn fills is not SSO): asked with -r.
    CHECK(secrets_to_ask(settings({{"sso-browser", "chromium"}}, {{"password", "x"}}), true).size() == 1);

    auto argv = espvpn_authenticate_command("/usr/sbin/espvpn", s, false, false);
    REQUIRE(argv);
    const std::vector<std::string> want{"/usr/sbin/espvpn", "--protocol=gp",   "--external-browser",
                                        "--sso-timeout=120", "--non-inter",    "--authenticate",
                                        "https://vpn/"};
    CHECK(*argv == want);
    auto program = espvpn_authenticate_command(
        "/usr/sbin/espvpn", settings({{"gateway", "https://vpn/"}, {"external-browser", "/usr/bin/firefox"}}, {}),
        false, true);
    REQUIRE(program);
    CHECK(std::find(program->begin(), program->end(), "--external-browser=/usr/bin/firefox") != program->end());
    CHECK(std::find(program->begin(), program->end(), "--non-inter") == program->end());  // a terminal: it may ask
    auto driven = espvpn_authenticate_command(
        "/usr/sbin/espvpn", settings({{"gateway", "https://vpn/"}, {"sso-browser", "chromium --headless=new"}}, {}),
        false, false);
    REQUIRE(driven);
    CHECK(std::find(driven->begin(), driven->end(), "--sso-browser=chromium --headless=new") != driven->end());
    CHECK_FALSE(is_sso_profile(settings({{"gateway", "https://vpn/"}}, {})));
}

TEST_CASE("auth dialog: an otp=yes profile asks a one-time code beside the password, every time") {
    auto s = settings({{"gateway", "https://vpn/"}, {"otp", "yes"}}, {{"password", "kept"}});
    auto asked = secrets_to_ask(s, false);
    REQUIRE(asked.size() == 2);
    CHECK(asked[0].key == "password");
    CHECK_FALSE(asked[0].should_ask);  // stored: handed over, not asked
    CHECK(asked[1].key == "otp");
    CHECK(asked[1].should_ask);  // a code is good once
    // A cookie (no -r) or a password that is not required: nothing, as before.
    CHECK(secrets_to_ask(settings({{"otp", "yes"}}, {{"cookie", "c"}}), false).empty());
    CHECK(secrets_to_ask(settings({{"otp", "yes"}, {"password-flags", "4"}}, {}), false).empty());
    CHECK(secrets_to_ask(settings({{"otp", "no"}}, {}), false).size() == 1);

    // The key file: both groups, both secret (nmcli 1.42 asks only IsSecret + ShouldAsk
    // groups), the known password not echoed.
    const std::string text = external_ui_reply("work", s, asked);
    GKeyFile* kf = g_key_file_new();
    REQUIRE(g_key_file_load_from_data(kf, text.data(), text.size(), G_KEY_FILE_NONE, nullptr));
    CHECK(g_key_file_get_boolean(kf, "otp", "IsSecret", nullptr));
    CHECK(g_key_file_get_boolean(kf, "otp", "ShouldAsk", nullptr));
    CHECK_FALSE(g_key_file_get_boolean(kf, "password", "ShouldAsk", nullptr));
    gchar* label = g_key_file_get_string(kf, "otp", "Label", nullptr);
    CHECK(std::string(label) == "One-time code");
    g_free(label);
    gchar* description = g_key_file_get_string(kf, "VPN Plugin UI", "Description", nullptr);
    CHECK(std::string(description).find("one-time code") != std::string::npos);
    g_free(description);
    g_key_file_free(kf);
    CHECK(text.find("kept") == std::string::npos);
}

TEST_CASE("auth dialog: a password read from the keyring goes to the client as the field's Value") {
    // nm-applet keeps a password-flags=1 password in the Secret Service but gives it to no
    // one: the dialog reads it and hands it over (ShouldAsk=false, Value) so that nm-applet
    // passes it to NetworkManager instead of asking; a value on an asked field is not written.
    auto s = settings({{"gateway", "https://vpn/"}, {"password-flags", "1"}}, {{"password", "from-keyring"}});
    auto asked = secrets_to_ask(s, false);
    REQUIRE(asked.size() == 1);
    REQUIRE_FALSE(asked[0].should_ask);
    asked[0].value = Secret::from_string("from-keyring");
    std::string text = external_ui_reply("work", s, asked);
    GKeyFile* kf = g_key_file_new();
    REQUIRE(g_key_file_load_from_data(kf, text.data(), text.size(), G_KEY_FILE_NONE, nullptr));
    gchar* value = g_key_file_get_string(kf, "password", "Value", nullptr);
    CHECK(std::string(value) == "from-keyring");
    CHECK_FALSE(g_key_file_get_boolean(kf, "password", "ShouldAsk", nullptr));
    g_free(value);
    g_key_file_free(kf);

    auto again = secrets_to_ask(s, true);  // -r: the kept one was refused, asked anew
    REQUIRE(again[0].should_ask);
    again[0].value = Secret::from_string("from-keyring");
    CHECK(external_ui_reply("work", s, again).find("from-keyring") == std::string::npos);
}
