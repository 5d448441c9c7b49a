#include <doctest/doctest.h>

#include "protocols/gp/requests.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {
GpClientInfo client() {
    GpClientInfo c;
    c.clientos = "Linux";
    c.os_version = "linux-64";
    c.computer = "my-host";
    return c;
}
GpSessionCookie cookie() {
    GpSessionCookie c;
    c.authcookie = Secret::from_string("4dc1b2b7e6a2f8d1c3b5a79e0f123456");
    c.portal = "GP_Gateway-N";
    c.user = "alice";
    c.domain = "(empty_domain)";
    c.preferred_ip = "10.20.30.40";
    c.computer = "my-host";
    return c;
}
std::string body(const GpRequest& r) { return std::string(r.body.reveal_text()); }
}  // namespace

TEST_CASE("gp request: prelogin as OC sends it") {
    GpRequest p = prelogin_request(GpInterface::Portal, client());
    CHECK(p.method == "POST");
    CHECK(p.target() == "/global-protect/prelogin.esp?tmp=tmp&clientVer=4100&clientos=Linux");
    CHECK(body(p) == "cas-support=yes");
    GpRequest g = prelogin_request(GpInterface::Gateway, client(), false);
    CHECK(g.target() == "/ssl-vpn/prelogin.esp?tmp=tmp&clientVer=4100&clientos=Linux");
    CHECK(body(g).empty());
}

TEST_CASE("gp request: gateway login with password, byte-exact") {
    GpCredentials cr;
    cr.user = "alice";
    cr.secret = Secret::from_string("p@ss w&rd");
    GpRequest r = login_request(GpInterface::Gateway, "vpn.example.com", client(), cr);
    CHECK(r.path == "/ssl-vpn/login.esp");
    CHECK(r.query.empty());
    CHECK(body(r) ==
          "jnlpReady=jnlpReady&ok=Login&direct=yes&clientVer=4100&prot=https:&internal=no"
          "&ipv6-support=yes&clientos=Linux&os-version=linux-64&server=vpn.example.com"
          "&computer=my-host&user=alice&passwd=p%40ss%20w%26rd");
}

TEST_CASE("gp request: portal getconfig answering a challenge, with portal cookies") {
    GpCredentials cr;
    cr.user = "alice";
    cr.secret = Secret::from_string("123456");
    cr.input_str = "e8aa";
    cr.portal_userauthcookie = Secret::from_string("AbCd+/Ef==");
    cr.portal_prelogonuserauthcookie = Secret::from_string("pre");
    cr.preferred_ip = "10.1.2.3";
    cr.preferred_ipv6 = "fd00::5";
    GpClientInfo c = client();
    c.ipv6 = false;
    GpRequest r = login_request(GpInterface::Portal, "portal.example.com", c, cr);
    CHECK(r.path == "/global-protect/getconfig.esp");
    CHECK(body(r) ==
          "jnlpReady=jnlpReady&ok=Login&direct=yes&clientVer=4100&prot=https:&internal=no"
          "&ipv6-support=no&clientos=Linux&os-version=linux-64&server=portal.example.com"
          "&computer=my-host&portal-userauthcookie=AbCd%2b%2fEf%3d%3d"
          "&portal-prelogonuserauthcookie=pre&preferred-ip=10.1.2.3&preferred-ipv6=fd00%3a%3a5"
          "&inputStr=e8aa&user=alice&passwd=123456");
}

TEST_CASE("gp request: SAML hand-off and client-certificate-only login") {
    GpCredentials saml;
    saml.user = "alice@example.com";
    saml.secret = Secret::from_string("FAKE_username_alice_password_x");
    saml.secret_field = "prelogin-cookie";
    GpRequest r = login_request(GpInterface::Gateway, "gw", client(), saml);
    CHECK(body(r).ends_with("&computer=my-host&user=alice%40example.com"
                            "&prelogin-cookie=FAKE_username_alice_password_x"));
    CHECK(body(r).find("passwd") == std::string::npos);

    GpCredentials cert;  // no user, no password: the TLS client certificate authenticates
    GpRequest c = login_request(GpInterface::Gateway, "gw", client(), cert);
    CHECK(body(c).ends_with("&computer=my-host&user=&passwd="));
}

TEST_CASE("gp request: gateway getconfig as OC and as the Windows client offer") {
    GpRequest r = getconfig_request(cookie(), client());
    CHECK(r.path == "/ssl-vpn/getconfig.esp");
    CHECK(body(r) ==
          "client-type=1&protocol-version=p1&internal=no&app-version=6.3.0-33&ipv6-support=yes"
          "&clientos=Linux&os-version=linux-64&hmac-algo=sha1%2cmd5%2csha256"
          "&enc-algo=aes-128-cbc%2caes-256-cbc"
          "&authcookie=4dc1b2b7e6a2f8d1c3b5a79e0f123456&portal=GP_Gateway-N&user=alice"
          "&domain=%28empty_domain%29&preferred-ip=10.20.30.40&computer=my-host");

    GpClientInfo c = client();
    c.app_version = "6.0.1-19";
    GpReconnectAddresses now{"10.20.30.41", "fd00::9"};
    GpRequest w = getconfig_request(cookie(), c, kWindowsAlgoOffer, &now);
    CHECK(body(w) ==
          "client-type=1&protocol-version=p1&internal=no&app-version=6.0.1-19&ipv6-support=yes"
          "&clientos=Linux&os-version=linux-64&hmac-algo=sha1%2c"
          "&enc-algo=aes-256-gcm%2caes-128-gcm%2caes-128-cbc%2c"
          "&preferred-ip=10.20.30.41&preferred-ipv6=fd00%3a%3a9"
          "&authcookie=4dc1b2b7e6a2f8d1c3b5a79e0f123456&portal=GP_Gateway-N&user=alice"
          "&domain=%28empty_domain%29&computer=my-host");
}

TEST_CASE("gp request: HIP check, HIP report and logout carry the session cookie") {
    const std::string ck =
        "authcookie=4dc1b2b7e6a2f8d1c3b5a79e0f123456&portal=GP_Gateway-N&user=alice"
        "&domain=%28empty_domain%29&preferred-ip=10.20.30.40&computer=my-host";
    GpRequest check = hip_check_request(cookie(), "10.20.30.40", "", "0123456789abcdef0123456789abcdef");
    CHECK(check.path == "/ssl-vpn/hipreportcheck.esp");
    CHECK(body(check) == "client-role=global-protect-full&" + ck +
                             "&client-ip=10.20.30.40&md5=0123456789abcdef0123456789abcdef");
    GpRequest check6 = hip_check_request(cookie(), "10.20.30.40", "fd00::1", "00");
    CHECK(body(check6).find("&client-ip=10.20.30.40&client-ipv6=fd00%3a%3a1&md5=00") != std::string::npos);

    GpRequest rep = hip_report_request(cookie(), "10.20.30.40", "", "<hip-report a=\"1\"/>");
    CHECK(rep.path == "/ssl-vpn/hipreport.esp");
    CHECK(body(rep) == "client-role=global-protect-full&" + ck +
                           "&client-ip=10.20.30.40&report=%3chip-report%20a%3d%221%22%2f%3e");

    GpRequest bye = logout_request(cookie());
    CHECK(bye.path == "/ssl-vpn/logout.esp");
    CHECK(body(bye) == ck);
}
