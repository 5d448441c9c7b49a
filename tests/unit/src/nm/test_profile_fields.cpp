// The editors' field table against the service: every field, set in the form, reaches
// espvpn's command line (or its stdin / descriptor 3) through the vpn.data items the
// service reads, and reads back into the same form.
#include <doctest/doctest.h>

#include <algorithm>

#include "src/nm/editor/profile_fields.h"
#include "src/nm/espvpn_command.h"

using namespace espvpn;
using namespace espvpn::nm;
using namespace espvpn::nm::editor;

namespace {

VpnSettings settings_of(const VpnItems& items) {
    VpnSettings s;
    s.data = items.data;
    for (const auto& [k, v] : items.secrets) s.secrets[k] = Secret::from_string(v);
    return s;
}

FormValues base_form() {
    FormValues f = form_from_items({});
    f.values["gateway"] = "https://vpn.example.com/";
    f.values["password"] = "pw";
    f.secret_flags["password"] = kFlagsSystem;
    return f;
}

// A form with one field changed, as the service would start espvpn for it.
struct Built {
    EspvpnCommand cmd;
    std::vector<std::string> auth;  // the auth dialog's espvpn --authenticate
};
Built build(const FormValues& form) {
    REQUIRE(validate_form(form).empty());
    VpnItems items;
    form_to_items(form, items);
    auto cmd = espvpn_command("/usr/sbin/espvpn", "helper", settings_of(items), 0);
    if (!cmd) FAIL("espvpn_command: " << cmd.error().message);
    CHECK(cmd->ignored_keys.empty());
    auto auth = espvpn_authenticate_command("/usr/sbin/espvpn", settings_of(items), false, false);
    REQUIRE(auth);
    return {std::move(*cmd), std::move(*auth)};
}

bool has(const std::vector<std::string>& argv, const std::string& a) {
    return std::find(argv.begin(), argv.end(), a) != argv.end();
}

}  // namespace

TEST_CASE("editor fields: each field reaches espvpn through the item the service reads") {
    // field -> (value in the form, what espvpn then gets)
    struct Case {
        const char* key;
        const char* value;
        const char* expect;  // an argv item of the service's command ("" = checked below)
    };
    const Case cases[] = {
        {"protocol", "gp", "--protocol=gp"},
        {"gateway", "https://gw.example.com:4443/", "https://gw.example.com:4443/"},
        {"user", "alice", "--user=alice"},
        {"authgroup", "staff", "--authgroup=staff"},
        {"password", "pw", ""},
        {"usercert", "pkcs11:token=t;object=c", "--certificate=pkcs11:token=t;object=c"},
        {"userkey", "/home/alice/key.pem", "--sslkey=/home/alice/key.pem"},
        {"cafile", "/etc/ssl/ca.pem", "--cafile=/etc/ssl/ca.pem"},
        {"servercert", "pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA=",
         "--servercert=pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA="},
        {"proxy", "socks5://10.0.0.1:1080/", "--proxy=socks5://10.0.0.1:1080/"},
        {"sso", "external", ""},
        {"token_mode", "totp", "--token-mode=totp"},
        {"token_secret", "base32:JBSWY3DPEHPK3PXP", "--token-secret=@/dev/fd/3"},
        {"no_cookie_cache", "yes", "--no-cookie-cache"},
        {"kill_switch", "yes", "--kill-switch"},
        {"reported_os", "win", "--os=win"},
        {"useragent", "AnyConnect Windows 4.10", "--useragent=AnyConnect Windows 4.10"},
        {"version_string", "6.1.0-33", "--version-string=6.1.0-33"},
        {"mtu", "1300", "--mtu=1300"},
        {"reconnect_timeout", "60", "--reconnect-timeout=60"},
        {"disable_ipv6", "yes", "--disable-ipv6"},
    };
    // The table and this list name the same fields: a new field needs its service side.
    std::vector<std::string> table, listed;
    for (const Field& f : fields()) table.push_back(f.key);
    for (const Case& c : cases) listed.push_back(c.key);
    CHECK(table == listed);

    for (const Case& c : cases) {
        CAPTURE(c.key);
        FormValues form = base_form();
        form.values[c.key] = c.value;
        if (std::string(c.key) == "token_secret") form.values["token_mode"] = "totp";
        if (std::string(c.key) == "token_mode") form.values["token_secret"] = "base32:JBSWY3DPEHPK3PXP";
        Built b = build(form);
        if (*c.expect) CHECK(has(b.cmd.argv, c.expect));
        // Before the field was set, espvpn did not get it.
        if (*c.expect && std::string(c.key) != "gateway") CHECK_FALSE(has(build(base_form()).cmd.argv, c.expect));
        if (std::string(c.key).starts_with("token_")) CHECK(b.cmd.token_secret.reveal_text() == "base32:JBSWY3DPEHPK3PXP");
        if (std::string(c.key) == "password") CHECK(b.cmd.stdin_line.reveal_text() == "pw");
        if (std::string(c.key) == "sso") CHECK(has(b.auth, "--external-browser"));
        // The login window's espvpn keeps (or not) the portal cookie: it gets the option too.
        if (std::string(c.key) == "no_cookie_cache") CHECK(has(b.auth, "--no-cookie-cache"));
    }
    FormValues driven = base_form();
    driven.values["sso"] = "driven";
    CHECK(has(build(driven).auth, "--sso-browser=chromium"));
}

TEST_CASE("editor fields: the form reads back from the items it wrote; other items are kept") {
    FormValues form = base_form();
    form.values["protocol"] = "gp";
    form.values["user"] = "bob";
    form.values["sso"] = "driven";
    form.values["token_mode"] = "totp";
    form.values["token_secret"] = "base32:JBSWY3DPEHPK3PXP";
    form.secret_flags["token_secret"] = kFlagsSystem;
    form.values["kill_switch"] = "yes";
    form.values["mtu"] = "1280";
    VpnItems items;
    items.data["resolve"] = "vpn.example.com:10.0.0.1";  // not in the table: left alone
    items.data["otp"] = "yes";
    items.data["username"] = "old";  // the service's other name for user: replaced
    form_to_items(form, items);
    CHECK(items.data.at("protocol") == "gp");
    CHECK(items.data.at("user") == "bob");
    CHECK(items.data.count("username") == 0);
    CHECK(items.data.at("sso-browser") == "chromium");
    CHECK(items.data.at("token_mode") == "totp");
    CHECK(items.data.at("token_secret-flags") == "0");
    CHECK(items.secrets.at("token_secret") == "base32:JBSWY3DPEHPK3PXP");
    CHECK(items.data.at("password-flags") == "0");
    CHECK(items.secrets.at("password") == "pw");
    CHECK(items.data.at("resolve") == "vpn.example.com:10.0.0.1");
    CHECK(items.data.at("otp") == "yes");
    CHECK(items.data.count("disable_ipv6") == 0);  // off = absent
    FormValues back = form_from_items(items);
    CHECK(back.values == form.values);
    CHECK(back.secret_flags == form.secret_flags);

    // Turned off again: the items go.
    back.values["kill_switch"] = "";
    back.values["sso"] = "";
    back.values["token_mode"] = "";
    back.values["mtu"] = "";
    form_to_items(back, items);
    for (const char* gone : {"kill_switch", "sso-browser", "external-browser", "token_mode", "token_secret-flags", "mtu"})
        CHECK_MESSAGE(items.data.count(gone) == 0, gone);
    CHECK(items.secrets.count("token_secret") == 0);
}

TEST_CASE("editor fields: a password asked every time is not stored, only its flags") {
    FormValues form = base_form();
    form.secret_flags["password"] = kFlagsNotSaved;
    VpnItems items;
    items.secrets["password"] = "stale";
    form_to_items(form, items);
    CHECK(items.data.at("password-flags") == "2");
    CHECK(items.secrets.count("password") == 0);
    // A new profile asks by default; an existing one with a stored password keeps it.
    CHECK(form_from_items({}).secret_flags.at("password") == kFlagsNotSaved);
    CHECK(form_from_items({{}, {{"password", "x"}}}).secret_flags.at("password") == kFlagsSystem);
}

TEST_CASE("editor fields: bad values are refused with the reason") {
    auto reasons = [](const char* key, const char* value) {
        FormValues form = base_form();
        form.values[key] = value;
        std::string all;
        for (const auto& inv : validate_form(form))
            if (inv.key == key) all += inv.reason;
        return all;
    };
    CHECK(reasons("gateway", "https://").find("no host") != std::string::npos);
    CHECK(reasons("gateway", "https://:443/").find("no host") != std::string::npos);
    CHECK(reasons("gateway", "").find("required") != std::string::npos);
    CHECK(reasons("gateway", "http://vpn.example.com/").find("https://") != std::string::npos);
    CHECK(reasons("gateway", "https://vpn.example.com:99999/").find("port") != std::string::npos);
    CHECK(reasons("gateway", "-oProxyCommand=x").find("'-'") != std::string::npos);
    CHECK(reasons("gateway", "vpn.example.com").empty());
    CHECK(reasons("gateway", "https://[2001:db8::1]:443/gp").empty());
    CHECK(reasons("servercert", "hello").find("no known form") != std::string::npos);
    CHECK(reasons("servercert", "sha256:zz12").find("no known form") != std::string::npos);
    CHECK(reasons("servercert", "sha256:ab12cd").empty());
    CHECK(reasons("servercert", "a1b2c3d4e5").empty());
    CHECK(reasons("mtu", "abc").find("number") != std::string::npos);
    CHECK(reasons("mtu", "100").find("576") != std::string::npos);
    CHECK(reasons("mtu", "1400").empty());
    CHECK(reasons("reconnect_timeout", "-1").find("seconds") != std::string::npos);
    CHECK(reasons("proxy", "ftp://p:21/").find("http://") != std::string::npos);
    CHECK(reasons("proxy", "http://:8080/").find("no host") != std::string::npos);
    CHECK(reasons("usercert", "relative.pem").find("absolute") != std::string::npos);
    CHECK(reasons("user", "al\x1b[31mice").find("control") != std::string::npos);
    CHECK(reasons("protocol", "nc").find("not one of") != std::string::npos);
    FormValues token = base_form();
    token.values["token_mode"] = "hotp";
    token.values["token_secret"] = "base32:JBSWY3DPEHPK3PXP,3";
    REQUIRE(validate_form(token).size() == 1);
    CHECK(validate_form(token)[0].reason.find("file") != std::string::npos);
    token.values["token_secret"] = "";
    CHECK(validate_form(token)[0].reason.find("needs its secret") != std::string::npos);
    // The service reads the key from NetworkManager: a key kept by the user's agent is not offered.
    token.values["token_secret"] = "@/home/alice/.hotp";
    token.secret_flags["token_secret"] = kFlagsAgent;
    REQUIRE(validate_form(token).size() == 1);
    CHECK(validate_form(token)[0].reason.find("storage 1 is not offered") != std::string::npos);
}

TEST_CASE("editor fields: 'Forget saved sign-in' runs espvpn --forget-cookies=PORTAL for a GP profile only") {
    FormValues form = base_form();
    form.values["protocol"] = "gp";
    form.values["gateway"] = "https://portal.example.com/";
    CHECK(forget_cookies_command("/usr/sbin/espvpn", form) ==
          std::vector<std::string>{"/usr/sbin/espvpn", "--forget-cookies=https://portal.example.com/"});
    form.values["gateway"] = "--version";  // never an option of its own
    CHECK(forget_cookies_command("/usr/sbin/espvpn", form).empty());
    form.values["gateway"] = "";
    CHECK(forget_cookies_command("/usr/sbin/espvpn", form).empty());
    form.values["gateway"] = "https://vpn.example.com/";
    form.values["protocol"] = "anyconnect";
    CHECK(forget_cookies_command("/usr/sbin/espvpn", form).empty());
}
