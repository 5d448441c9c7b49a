// Import of NetworkManager-openconnect and openconnect profiles, and export read back.
#include <doctest/doctest.h>

#include "src/nm/editor/profile_import.h"

using namespace espvpn::nm::editor;

namespace {

Profile imported(const std::string& text) {
    Profile p;
    std::string error;
    if (!import_profile(text, p, error)) FAIL("import failed: " << error);
    return p;
}

std::string import_error(const std::string& text) {
    Profile p;
    std::string error;
    CHECK_FALSE(import_profile(text, p, error));
    return error;
}

}  // namespace

TEST_CASE("import: a NetworkManager-openconnect keyfile (GlobalProtect) becomes an espvpn profile") {
    // As NetworkManager 1.42 stores a profile nm-connection-editor made with NM-openconnect 1.2.8.
    const Profile p = imported(R"([connection]
id=Work GP
uuid=0b7b3f4c-2f7e-4a3b-9a51-3b1c4d1e2f00
type=vpn
autoconnect=false

[vpn]
authtype=password
autoconnect-flags=0
cacert=/etc/ssl/work-ca.pem
certsigs-flags=0
cookie-flags=2
enable_csd_trojan=no
gateway=vpn.example.com
gateway-flags=2
gwcert-flags=2
lasthost-flags=0
pem_passphrase_fsid=no
prevent_invalid_cert=no
protocol=gp
proxy=http://proxy.example.com:3128/
reported_os=win
resolve-flags=2
stoken_source=totp
stoken_string-flags=1
usercert=/home/alice/cert.pem
userkey=/home/alice/key.pem
xmlconfig-flags=0
service-type=org.freedesktop.NetworkManager.openconnect

[vpn-secrets]
form:_login:user=alice
stoken_string=base32:JBSWY3DPEHPK3PXP

[ipv4]
method=auto
)");
    CHECK(p.name == "Work GP");
    const auto& d = p.items.data;
    CHECK(d.at("protocol") == "gp");
    CHECK(d.at("gateway") == "vpn.example.com");
    CHECK(d.at("cafile") == "/etc/ssl/work-ca.pem");
    CHECK(d.at("proxy") == "http://proxy.example.com:3128/");
    CHECK(d.at("reported_os") == "win");
    CHECK(d.at("usercert") == "/home/alice/cert.pem");
    CHECK(d.at("userkey") == "/home/alice/key.pem");
    CHECK(d.at("user") == "alice");
    CHECK(d.at("token_mode") == "totp");
    // NM-openconnect's keyring copy (flags 1) becomes NetworkManager's: the service reads it there.
    CHECK(d.at("token_secret-flags") == "0");
    CHECK(p.left_out == std::vector<std::string>{"stoken_string-flags=1 (the key is now kept by NetworkManager)"});
    CHECK(p.items.secrets.at("token_secret") == "base32:JBSWY3DPEHPK3PXP");
    CHECK(d.at("password-flags") == "2");
    // NM-openconnect's own items do not come along.
    for (const char* gone : {"authtype", "cacert", "stoken_source", "enable_csd_trojan"})
        CHECK_MESSAGE(d.count(gone) == 0, gone);
    // The login's session secrets are never saved (NM-openconnect's flags dropped, set anew).
    for (const char* session : {"cookie-flags", "gateway-flags", "gwcert-flags", "resolve-flags", "challenge-flags",
                                 "challenge2-flags", "challenge3-flags"})
        CHECK_MESSAGE(d.at(session) == "2", session);
    // The editor shows it without complaint.
    CHECK(validate_form(form_from_items(p.items)).empty());
}

TEST_CASE("import: NetworkManager-openconnect's own export (AnyConnect) becomes an espvpn profile") {
    const Profile p = imported(R"([openconnect]
Description=Office
Host=https://ocserv.example.com:8443/
CACert=
Protocol=anyconnect
Proxy=
CSDEnable=0
CSDWrapper=
ReportedOS=
UserCertificate=(null)
PrivateKey=
FSID=0
PreventInvalidCert=0
StokenSource=
StokenString=
)");
    CHECK(p.name == "Office");
    CHECK(p.items.data.at("protocol") == "anyconnect");
    CHECK(p.items.data.at("gateway") == "https://ocserv.example.com:8443/");
    CHECK(p.items.data.count("usercert") == 0);  // "(null)": NM-openconnect's old exports
    CHECK(p.items.data.count("cafile") == 0);
    CHECK(p.items.secrets.empty());
}

TEST_CASE("import: an openconnect --config file") {
    const Profile p = imported(R"(# work VPN, as used with openconnect --config
protocol=gp
server=https://portal.example.com/
user alice
--authgroup=Europe
servercert sha256:4e9a0c11
os=mac-intel
version-string=6.1.0-33
mtu=1300
disable-ipv6
kill-switch
no-cookie-cache
external-browser
token-mode=totp
token-secret=base32:JBSWY3DPEHPK3PXP
background
)");
    const auto& d = p.items.data;
    CHECK(d.at("protocol") == "gp");
    CHECK(d.at("gateway") == "https://portal.example.com/");
    CHECK(d.at("user") == "alice");
    CHECK(d.at("authgroup") == "Europe");
    CHECK(d.at("servercert") == "sha256:4e9a0c11");
    CHECK(d.at("reported_os") == "mac-intel");
    CHECK(d.at("version_string") == "6.1.0-33");
    CHECK(d.at("mtu") == "1300");
    CHECK(d.at("disable_ipv6") == "yes");
    CHECK(d.at("kill_switch") == "yes");
    CHECK(d.at("no_cookie_cache") == "yes");
    CHECK(d.at("external-browser") == "yes");
    CHECK(d.at("token_mode") == "totp");
    CHECK(p.items.secrets.at("token_secret") == "base32:JBSWY3DPEHPK3PXP");
    CHECK(p.left_out == std::vector<std::string>{"background"});
    CHECK(validate_form(form_from_items(p.items)).empty());
}

TEST_CASE("import: what espvpn cannot use is refused with the reason") {
    CHECK(import_error("[vpn]\nservice-type=org.freedesktop.NetworkManager.openconnect\ngateway=h\nprotocol=nc\n")
              .find("'nc' is not one espvpn speaks") != std::string::npos);
    CHECK(import_error("[openconnect]\nProtocol=pulse\nHost=h\n").find("'pulse'") != std::string::npos);
    CHECK(import_error("[vpn]\nservice-type=org.freedesktop.NetworkManager.openvpn\nremote=h\n").find("openvpn") !=
          std::string::npos);
    CHECK(import_error("[openconnect]\nDescription=x\n").find("no Host") != std::string::npos);
    CHECK(import_error("protocol=gp\nuser=alice\n").find("no server") != std::string::npos);
    CHECK(import_error("protocol=fortinet\nserver=h\n").find("fortinet") != std::string::npos);
    CHECK(import_error("server\n").find("needs a value") != std::string::npos);
    CHECK(import_error(std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10)).find("not text") != std::string::npos);
    CHECK(import_error("<html>\n").find("not an option") != std::string::npos);
    CHECK(import_error("[connection]\nid=x\n").find("neither") != std::string::npos);
}

TEST_CASE("export: the keyfile form without secrets, which import reads back") {
    Profile p;
    p.name = "Work = GP";
    p.items.data = {{"gateway", "https://vpn.example.com/"}, {"protocol", "gp"},         {"user", "alice"},
                    {"password-flags", "1"},                 {"token_mode", "totp"},     {"token_secret-flags", "0"},
                    {"useragent", "PAN GlobalProtect; x"},   {"sso-browser", "chromium --ozone-platform=wayland"},
                    {"no_cookie_cache", "yes"}};
    p.items.secrets = {{"password", "s3cret"}, {"token_secret", "base32:JBSWY3DPEHPK3PXP"}};
    const std::string text = export_profile(p);
    CHECK(text.find("s3cret") == std::string::npos);
    CHECK(text.find("JBSWY3DP") == std::string::npos);
    CHECK(text.find("service-type=org.freedesktop.NetworkManager.espvpn") != std::string::npos);
    const Profile back = imported(text);
    CHECK(back.name == p.name);
    auto want = p.items.data;  // and the session secrets' flags, which import adds
    for (const char* session : {"cookie-flags", "gateway-flags", "gwcert-flags", "resolve-flags", "challenge-flags",
                                 "challenge2-flags", "challenge3-flags"}) want[session] = "2";
    CHECK(back.items.data == want);
    CHECK(back.items.secrets.empty());
}
