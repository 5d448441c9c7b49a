#include <doctest/doctest.h>

#include "fixture.h"
#include "protocols/gp/auth_reply.h"
#include "protocols/gp/prelogin.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {
GpReply must_classify(std::string_view body) {
    auto r = classify_reply(body);
    INFO(std::string(body.substr(0, 80)));
    REQUIRE(r.ok());
    return std::move(*r);
}
}  // namespace

TEST_CASE("gp reply kind 1: an XML document with a meaningful root") {
    GpReply r = must_classify("<jnlp><application-desc/></jnlp>");
    REQUIRE(std::holds_alternative<xml::Document>(r));
    CHECK(std::get<xml::Document>(r).root_name() == "jnlp");
    GpReply ok = must_classify(R"(<response status="success"><x/></response>)");
    CHECK(std::holds_alternative<xml::Document>(ok));
}

TEST_CASE("gp reply kind 2: <response status=error>") {
    GpReply r = must_classify(
        R"(<response status="error"><error>Invalid authentication cookie</error></response>)");
    REQUIRE(std::holds_alternative<GpServerError>(r));
    CHECK(std::get<GpServerError>(r).message == "Invalid authentication cookie");
    CHECK(std::get<GpServerError>(r).kind == GpErrorKind::CookieRejected);

    GpReply bare = must_classify("<error>Valid client certificate is required</error>");
    REQUIRE(std::holds_alternative<GpServerError>(bare));
    CHECK(std::get<GpServerError>(bare).kind == GpErrorKind::ClientCertRequired);

    GpReply empty = must_classify(R"(<response status="error"/>)");
    REQUIRE(std::holds_alternative<GpServerError>(empty));
    CHECK_FALSE(std::get<GpServerError>(empty).message.empty());
}

TEST_CASE("gp reply kind 3: prelogin error") {
    GpReply r = must_classify(
        "<prelogin-response><status>Error</status><msg>GlobalProtect portal does not exist</msg>"
        "</prelogin-response>");
    REQUIRE(std::holds_alternative<GpServerError>(r));
    CHECK(std::get<GpServerError>(r).message == "GlobalProtect portal does not exist");
    CHECK(std::get<GpServerError>(r).kind == GpErrorKind::WrongInterface);
}

TEST_CASE("gp reply kind 4: bare JavaScript challenge with JS escapes") {
    GpReply r = must_classify(
        "var respStatus = \"Challenge\";\n"
        "var respMsg = \"Enter a response from your token:\\n\\\"PIN\\\" and \\'code\\' \\u00e9\";\n"
        "thisForm.inputStr.value = \"e8aa\";\n");
    REQUIRE(std::holds_alternative<GpChallenge>(r));
    const auto& c = std::get<GpChallenge>(r);
    CHECK(c.prompt == "Enter a response from your token:\n\"PIN\" and 'code' \xc3\xa9");
    CHECK(c.input_str == "e8aa");

    GpReply err = must_classify(
        "var respStatus = \"Error\";\nvar respMsg = \"Authentication failure: Invalid username or "
        "password\";\nthisForm.inputStr.value = \"\";");
    REQUIRE(std::holds_alternative<GpServerError>(err));
    CHECK(std::get<GpServerError>(err).kind == GpErrorKind::AuthFailed);
    CHECK(std::get<GpServerError>(err).message ==
          "Authentication failure: Invalid username or password");
}

TEST_CASE("gp reply kind 5: the JavaScript inside HTML with entities") {
    GpReply r = must_classify(gp_fixture("challenge_html.txt"));
    REQUIRE(std::holds_alternative<GpChallenge>(r));
    CHECK(std::get<GpChallenge>(r).prompt == "Enter the code from your token:\n(6 digits) & press 'OK'");
    CHECK(std::get<GpChallenge>(r).input_str == "e8aa7c");
}

TEST_CASE("gp reply kind 6: <challenge> XML") {
    GpReply r = must_classify(
        "<challenge><user>alice</user><inputstr>7f3c</inputstr><respmsg>Enter OTP</respmsg></challenge>");
    REQUIRE(std::holds_alternative<GpChallenge>(r));
    CHECK(std::get<GpChallenge>(r).prompt == "Enter OTP");
    CHECK(std::get<GpChallenge>(r).input_str == "7f3c");
    auto bad = classify_reply("<challenge><respmsg>x</respmsg></challenge>");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message == "<challenge> without <inputstr>");
}

TEST_CASE("gp reply: plain text and malformed bodies") {
    GpReply t = must_classify("errors getting SSL/VPN config");
    REQUIRE(std::holds_alternative<GpServerError>(t));
    CHECK(std::get<GpServerError>(t).kind == GpErrorKind::CookieRejected);

    CHECK(classify_reply("").error().message == "empty reply");
    CHECK(classify_reply("<!DOCTYPE html>\n<html><body>Sign in</body></html>").error().message ==
          "server sent an HTML page without a GlobalProtect reply");
    CHECK_FALSE(classify_reply("<response><ip-address>1.2").ok());
    auto js = classify_reply("var respStatus = \"Challenge\";\nvar respMsg = \"x\";");
    REQUIRE_FALSE(js.ok());
    CHECK(js.error().message == "JavaScript challenge without thisForm.inputStr.value");
    auto unterminated = classify_reply("var respStatus = \"Chall");
    REQUIRE_FALSE(unterminated.ok());
    CHECK(unterminated.error().message.find("unterminated") != std::string::npos);
    auto odd = classify_reply("var respStatus = \"Maybe\";");
    REQUIRE_FALSE(odd.ok());
    CHECK(odd.error().message.find("unknown respStatus") != std::string::npos);
}

TEST_CASE("gp prelogin: labels, region, auth message") {
    auto r = parse_prelogin_reply(R"(<?xml version="1.0" encoding="UTF-8" ?>
<prelogin-response>
  <status>Success</status>
  <ccusername/>
  <autosubmit>false</autosubmit>
  <msg/>
  <newmsg/>
  <authentication-message>Enter login credentials</authentication-message>
  <username-label>Username</username-label>
  <password-label>OTP</password-label>
  <panos-version>1</panos-version>
  <region>MERCURY</region>
</prelogin-response>)");
    REQUIRE(r.ok());
    REQUIRE(std::holds_alternative<GpPrelogin>(*r));
    const auto& p = std::get<GpPrelogin>(*r);
    CHECK(p.status == "Success");
    CHECK(p.region == "MERCURY");
    CHECK(p.authentication_message == "Enter login credentials");
    CHECK(p.username_label == "Username");
    CHECK(p.password_is_otp());
    CHECK_FALSE(p.saml.has_value());
}

TEST_CASE("gp prelogin: SAML REDIRECT and POST are decoded") {
    // base64("https://idp.example.com/sso?x=1&y=2")
    auto r = parse_prelogin_reply(R"(<prelogin-response><status>Success</status>
<saml-auth-method>REDIRECT</saml-auth-method>
<saml-request>aHR0cHM6Ly9pZHAuZXhhbXBsZS5jb20vc3NvP3g9MSZ5PTI=</saml-request>
<saml-auth-status>0</saml-auth-status><saml-default-browser>yes</saml-default-browser>
<saml-request-timeout>600</saml-request-timeout><region>US</region></prelogin-response>)");
    REQUIRE(r.ok());
    const auto& p = std::get<GpPrelogin>(*r);
    REQUIRE(p.saml.has_value());
    CHECK(p.saml->method == GpSamlRequest::Method::Redirect);
    CHECK(p.saml->decoded == "https://idp.example.com/sso?x=1&y=2");
    CHECK(p.saml->default_browser);
    CHECK(p.saml->request_timeout == "600");

    // base64 of an HTML form, wrapped over lines as servers do
    auto post = parse_prelogin_reply(R"(<prelogin-response><status>Success</status>
<saml-auth-method>POST</saml-auth-method>
<saml-request>PGh0bWw+PGZvcm0+
PC9mb3JtPjwvaHRtbD4=</saml-request></prelogin-response>)");
    REQUIRE(post.ok());
    const auto& pp = std::get<GpPrelogin>(*post);
    REQUIRE(pp.saml.has_value());
    CHECK(pp.saml->method == GpSamlRequest::Method::Post);
    CHECK(pp.saml->decoded == "<html><form></form></html>");
    CHECK_FALSE(pp.saml->default_browser);

    // Only one of the two: no SAML.
    auto half = parse_prelogin_reply(
        "<prelogin-response><status>Success</status><saml-auth-method>POST</saml-auth-method>"
        "</prelogin-response>");
    REQUIRE(half.ok());
    CHECK_FALSE(std::get<GpPrelogin>(*half).saml.has_value());

    auto bad = parse_prelogin_reply(
        "<prelogin-response><status>Success</status><saml-auth-method>POST</saml-auth-method>"
        "<saml-request>!!!</saml-request></prelogin-response>");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find("saml-request") != std::string::npos);
}

TEST_CASE("gp prelogin: wrong root and errors pass through") {
    auto wrong = parse_prelogin_reply("<policy/>");
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.error().message == "unexpected root <policy>, expected <prelogin-response>");
    auto err = parse_prelogin_reply(
        "<prelogin-response><status>Error</status><msg>GlobalProtect gateway does not exist</msg>"
        "</prelogin-response>");
    REQUIRE(err.ok());
    REQUIRE(std::holds_alternative<GpServerError>(*err));
    CHECK(std::get<GpServerError>(*err).kind == GpErrorKind::WrongInterface);
}
