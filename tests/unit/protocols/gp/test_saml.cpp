#include <doctest/doctest.h>

#include "protocols/gp/saml.h"

using namespace espvpn;
using namespace espvpn::gp;

TEST_CASE("gp saml: ACS result from headers (as the OC fake server sends it)") {
    GpHeaderList h{{"Content-Type", "text/html"},
                   {"SAML-Auth-Status", "1"},
                   {"saml-username", "alice"},
                   {"prelogin-cookie", "FAKE_username_alice_password_x"}};
    auto r = parse_saml_acs_result(h, "");
    REQUIRE(r.ok());
    CHECK(r->username == "alice");
    CHECK(r->field == "prelogin-cookie");
    CHECK(r->value.reveal_text() == "FAKE_username_alice_password_x");

    GpHeaderList failed{{"saml-auth-status", "-1"}, {"saml-username", "alice"}};
    CHECK(parse_saml_acs_result(failed, "").error().message ==
          "SAML authentication failed (saml-auth-status -1)");
    GpHeaderList short_cookie{{"saml-auth-status", "1"}, {"saml-username", "a"},
                              {"portal-userauthcookie", "abc"}};
    CHECK(parse_saml_acs_result(short_cookie, "").error().message ==
          "SAML result: portal-userauthcookie is too short to be a cookie");
    GpHeaderList no_cookie{{"saml-auth-status", "1"}, {"saml-username", "a"}};
    CHECK(parse_saml_acs_result(no_cookie, "").error().message.find("neither") != std::string::npos);
}

TEST_CASE("gp saml: ACS result only in an HTML comment") {
    auto r = parse_saml_acs_result({}, R"(<html><body>Login done<!--
<saml-auth-status>1</saml-auth-status><saml-username>bob@example.com</saml-username>
<portal-userauthcookie>Zm9vYmFyYmF6</portal-userauthcookie> --></body></html>)");
    REQUIRE(r.ok());
    CHECK(r->username == "bob@example.com");
    CHECK(r->field == "portal-userauthcookie");
    CHECK(r->value.reveal_text() == "Zm9vYmFyYmF6");
    CHECK(parse_saml_acs_result({}, "<html>nothing</html>").error().message ==
          "SAML result: no saml-auth-status in the reply");
}

TEST_CASE("gp saml: globalprotectcallback URLs, base64 and CAS") {
    // base64("<saml-auth-status>1</saml-auth-status><saml-username>carol</saml-username><prelogin-cookie>cookie123</prelogin-cookie>")
    auto b = parse_globalprotect_callback(
        "globalprotectcallback:PHNhbWwtYXV0aC1zdGF0dXM+MTwvc2FtbC1hdXRoLXN0YXR1cz48c2FtbC11c2VybmFtZT5jYXJvbDwvc2FtbC11c2VybmFtZT48cHJlbG9naW4tY29va2llPmNvb2tpZTEyMzwvcHJlbG9naW4tY29va2llPg==");
    REQUIRE(b.ok());
    CHECK(b->username == "carol");
    CHECK(b->field == "prelogin-cookie");
    CHECK(b->value.reveal_text() == "cookie123");

    auto cas = parse_globalprotect_callback("globalprotectcallback:/cas-as%3D1%26un%3Ddave%26token%3Dt0k%2Ben");
    REQUIRE(cas.ok());
    CHECK(cas->username == "dave");
    CHECK(cas->field == "token");
    CHECK(cas->value.reveal_text() == "t0k+en");
    auto plain = parse_globalprotect_callback("globalprotectcallback:cas-as=1&un=erin&token=abc");
    REQUIRE(plain.ok());
    CHECK(plain->username == "erin");

    CHECK(parse_globalprotect_callback("https://x/").error().message == "not a globalprotectcallback: URL");
    CHECK_FALSE(parse_globalprotect_callback("globalprotectcallback:cas-as=1&token=x").ok());
    CHECK_FALSE(parse_globalprotect_callback("globalprotectcallback:!!").ok());
}

TEST_CASE("gp saml: status in the headers, the cookie only in the body") {
    GpHeaderList h{{"saml-auth-status", "1"}, {"saml-username", "alice"}};
    auto r = parse_saml_acs_result(h, "<html><!-- <prelogin-cookie>cookie-in-body</prelogin-cookie> --></html>");
    REQUIRE(r.ok());
    CHECK(r->username == "alice");
    CHECK(r->value.reveal_text() == "cookie-in-body");
    // A header still wins over the body.
    h.emplace_back("prelogin-cookie", "cookie-in-header");
    CHECK(parse_saml_acs_result(h, "<prelogin-cookie>cookie-in-body</prelogin-cookie>")->value.reveal_text() ==
          "cookie-in-header");
}
