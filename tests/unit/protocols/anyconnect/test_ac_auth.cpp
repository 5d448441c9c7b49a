// config-auth documents against replies captured from ocserv 1.1.6.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/session_cookie.h"
#include "protocols/anyconnect/strap.h"
#include "protocols/xml/document.h"

using namespace espvpn;
using namespace espvpn::anyconnect;

namespace {

std::string fixture(const std::string& name) {
    std::ifstream in(std::string(AC_FIXTURE_DIR) + "/" + name, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "missing fixture " << name);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

AcAuthReply must_parse(const std::string& body) {
    auto r = parse_auth_reply(body);
    if (!r) FAIL(r.error().message);
    return std::move(*r);
}

std::string error_of(const std::string& body) {
    auto r = parse_auth_reply(body);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
}

}  // namespace

TEST_CASE("ocserv username, password and success documents") {
    auto user = must_parse(fixture("ocserv_username_form.xml"));
    CHECK(user.type == AcAuthReply::Type::auth_request);
    CHECK_FALSE(user.success());
    CHECK(user.auth_id == "main");
    CHECK(user.message == "Please enter your username.");
    CHECK(user.form_action == "/auth");
    REQUIRE(user.fields.size() == 1);
    CHECK(user.fields[0].kind == AcFormField::Kind::text);
    CHECK(user.fields[0].name == "username");
    CHECK(user.fields[0].label == "Username:");
    CHECK(user.group_list() == nullptr);

    auto pass = must_parse(fixture("ocserv_password_form.xml"));
    REQUIRE(pass.fields.size() == 1);
    CHECK(pass.fields[0].kind == AcFormField::Kind::password);
    CHECK(pass.fields[0].name == "password");

    auto ok = must_parse(fixture("ocserv_success.xml"));
    CHECK(ok.success());
    CHECK(ok.type == AcAuthReply::Type::complete);
    CHECK(ok.banner == "Hello from test ocserv");

    auto failed = must_parse(fixture("ocserv_login_failed.xml"));
    CHECK(failed.message.rfind("Login failed.", 0) == 0);
    CHECK(failed.field("password") != nullptr);
}

TEST_CASE("ocserv group list: labels and values (the choice: tests/unit/src/session/test_login_answers.cpp)") {
    auto form = must_parse(fixture("ocserv_group_form.xml"));
    const AcFormField* groups = form.group_list();
    REQUIRE(groups != nullptr);
    CHECK(groups->kind == AcFormField::Kind::select);
    REQUIRE(groups->options.size() == 2);
    CHECK(groups->options[0].value == "group1");
    CHECK(groups->options[0].label == "First Group");
    CHECK(groups->options[1].value == "group2");

    auto second = must_parse(fixture("ocserv_group_form_group2.xml"));
    CHECK(second.group_list()->options[0].value == "group2");
}

TEST_CASE("init and auth-reply documents") {
    AcClientInfo client;
    client.group_access = "https://10.201.0.1:4443/";
    std::string init = build_init_request(client);
    CHECK(init.find("<config-auth client=\"vpn\" type=\"init\" aggregate-auth-version=\"2\">") != std::string::npos);
    CHECK(init.find("<version who=\"vpn\">v9.01-3</version>") != std::string::npos);
    CHECK(init.find("<device-id>linux-64</device-id>") != std::string::npos);
    CHECK(init.find("<group-access>https://10.201.0.1:4443/</group-access>") != std::string::npos);
    CHECK(init.find("group-select") == std::string::npos);
    CHECK(build_init_request(client, "group2").find("<group-select>group2</group-select>") != std::string::npos);

    std::vector<AcFieldValue> fields;
    fields.push_back({"password", Secret::from_string("a<b&c")});
    Secret reply = build_auth_reply(client, fields, "grp", "<opaque is-for=\"sg\"><x>1</x></opaque>");
    std::string_view text = reply.reveal_text();
    CHECK(text.find("type=\"auth-reply\"") != std::string_view::npos);
    CHECK(text.find("<auth><password>a&lt;b&amp;c</password></auth><group-select>grp</group-select>") !=
          std::string_view::npos);
    CHECK(text.find("<opaque is-for=\"sg\"><x>1</x></opaque><auth>") != std::string_view::npos);
    CHECK(text.find("host-scan-token") == std::string_view::npos);
    // After a CSD host scan its token goes in every answer, after the group (openconnect's order).
    Secret scanned = build_auth_reply(client, fields, "grp", "", "TOK<1>");
    CHECK(scanned.reveal_text().find("</group-select><host-scan-token>TOK&lt;1&gt;</host-scan-token></config-auth>") !=
          std::string_view::npos);
    // A challenge's "answer" goes back as <password>, verify_* fields not at all (Cisco, as openconnect).
    std::vector<AcFieldValue> challenge;
    challenge.push_back({"answer", Secret::from_string("123456")});
    challenge.push_back({"verify_pin", Secret::from_string("x")});
    challenge.push_back({"username", Secret::from_string("u")});
    Secret c = build_auth_reply(client, challenge);
    CHECK(c.reveal_text().find("<auth><password>123456</password><username>u</username></auth>") !=
          std::string_view::npos);
    CHECK(reply_element("new_password") == "password");
    CHECK(reply_element("secondary_password") == "secondary_password");
    // The reply is XML ocserv (and our parser) can read back.
    CHECK(padding_for(0).size() == 64);
    CHECK((100 + padding_for(100).size()) % 64 == 0);
}

TEST_CASE("opaque, hidden fields and errors") {
    auto r = must_parse(
        "<?xml version=\"1.0\"?><config-auth client=\"vpn\" type=\"auth-request\"><opaque is-for=\"sg\">"
        "<tunnel-group>TG</tunnel-group></opaque><auth id=\"main\"><error>Try again</error><form action=\"/x\">"
        "<input type=\"hidden\" name=\"tok\" value=\"v1\"/><input type=\"submit\" name=\"go\"/>"
        "<input type=\"password\" name=\"secondary_password\" label=\"Password2:\"/></form></auth></config-auth>");
    CHECK(r.opaque == "<opaque is-for=\"sg\"><tunnel-group>TG</tunnel-group></opaque>");
    CHECK(r.error == "Try again");
    REQUIRE(r.fields.size() == 2);  // the submit button is not a field
    CHECK(r.fields[0].kind == AcFormField::Kind::hidden);
    CHECK(r.fields[0].value == "v1");
    CHECK(r.fields[1].name == "secondary_password");

    CHECK(error_of("not xml at all <").find("auth reply") != std::string::npos);
    CHECK(error_of("<html><body>hi</body></html>").find("config-auth") != std::string::npos);
    CHECK(error_of("<config-auth type=\"weird\"><auth id=\"main\"/></config-auth>").find("weird") != std::string::npos);
    CHECK(error_of("<config-auth type=\"auth-request\"><auth id=\"main\"><error>Locked</error></auth></config-auth>")
              .find("no form: Locked") != std::string::npos);
    CHECK(error_of("<config-auth type=\"auth-request\"><auth id=\"m\"><form><input type=\"text\" name=\"a b\"/>"
                   "</form></auth></config-auth>")
              .find("unusable name") != std::string::npos);
    CHECK(error_of("<config-auth type=\"auth-request\"><auth id=\"m\"><form><select name=\"group_list\"/>"
                   "</form></auth></config-auth>")
              .find("no options") != std::string::npos);
}

TEST_CASE("<session-token>: the session cookie in the XML (Cisco), checked, redacted for dumps") {
    // A complete reply as an independent AnyConnect server sends it: no Set-Cookie, the token in the XML.
    auto done = must_parse(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<config-auth client=\"vpn\" type=\"complete\" "
        "aggregate-auth-version=\"2\"><session-id>4242</session-id><session-token>\n 7B8C@1234@AB=\n</session-token>"
        "<auth id=\"success\"><banner>hi</banner></auth></config-auth>");
    CHECK(done.success());
    CHECK(done.session_token.reveal_text() == "7B8C@1234@AB=");
    CHECK(must_parse(fixture("ocserv_success.xml")).session_token.empty());
    CHECK(must_parse("<config-auth type=\"complete\"><session-token/><auth id=\"success\"/></config-auth>")
              .session_token.empty());
    // A token that would break the Cookie header or the printed COOKIE line: an error that does not quote it.
    for (const char* bad : {"a;b=c", "a b", "a\"b", "a,b", "a\\b", "ab&#13;&#10;X-Evil: 1"}) {
        std::string e = error_of(std::string("<config-auth type=\"complete\"><session-token>") + bad +
                                 "</session-token><auth id=\"success\"/></config-auth>");
        CHECK(e.find("not a usable cookie value") != std::string::npos);
        CHECK(e.find(bad) == std::string::npos);
    }

    CHECK(redact_session_token("<a><session-token>S3CRET</session-token><b/></a>") ==
          "<a><session-token><redacted></session-token><b/></a>");
    CHECK(redact_session_token("<session-token/><session-token x=\"1\">T1</session-token>x<session-token>T2") ==
          "<session-token/><session-token x=\"1\"><redacted></session-token>x<session-token><redacted>");
    CHECK(redact_session_token("<auth id=\"main\"/>") == "<auth id=\"main\"/>");
}

TEST_CASE("an <error> beside <auth> is the reply's error (openconnect reads it there too)") {
    auto r = must_parse("<config-auth type=\"auth-request\"><error>Certificate Validation Failure</error>"
                        "<auth id=\"main\"><form><input type=\"password\" name=\"password\"/></form></auth></config-auth>");
    CHECK(r.error == "Certificate Validation Failure");
    CHECK(must_parse("<config-auth type=\"auth-request\"><error>outer</error><auth id=\"main\"><error>inner</error><form>"
                     "<input type=\"password\" name=\"password\"/></form></auth></config-auth>")
              .error == "inner");
    CHECK(error_of("<config-auth type=\"auth-request\"><error>Tunnel group locked</error></config-auth>")
              .find("no <auth> element: Tunnel group locked") != std::string::npos);
}

TEST_CASE("client-cert-fail in init; a form without an action posts to \"/\"") {
    AcClientInfo client;
    client.group_access = "https://vpn.test/grp";
    CHECK(build_init_request(client).find("client-cert-fail") == std::string::npos);
    // openconnect's order: group-access, client-cert-fail, group-select.
    CHECK(build_init_request(client, "g1", true)
              .find("<group-access>https://vpn.test/grp</group-access><client-cert-fail/><group-select>g1</group-select>"
                    "</config-auth>") != std::string::npos);
    auto form = must_parse("<config-auth type=\"auth-request\"><auth id=\"main\"><form><input type=\"password\" "
                           "name=\"password\"/></form></auth></config-auth>");
    CHECK(form.form_action == "/");
    CHECK(must_parse("<config-auth type=\"auth-request\"><client-cert-request/></config-auth>").form_action.empty());
}

TEST_CASE("session cookie: bare value, openconnect's composite string, our own output") {
    const std::string value = "AN9/RtPmNQfL+3qdpl4JKzNj4HXtOQvfc0U3LQIIaFs=";
    auto bare = webvpn_from_cookie_text(value);
    REQUIRE(bare.ok());
    CHECK(bare->reveal_text() == value);  // '=' padding kept
    auto composite = webvpn_from_cookie_text("openconnect_strapkey=MHcCAQEEIBAX==; webvpn=" + value);
    REQUIRE(composite.ok());
    CHECK(composite->reveal_text() == value);
    auto quoted = webvpn_from_cookie_text("COOKIE='webvpn=" + value + "'\n");
    REQUIRE(quoted.ok());
    CHECK(quoted->reveal_text() == value);
    Secret ours = cookie_text(Secret::from_string(value));
    CHECK(ours.reveal_text() == "webvpn=" + value);
    auto round = webvpn_from_cookie_text(ours.reveal_text());
    REQUIRE(round.ok());
    CHECK(round->reveal_text() == value);

    CHECK_FALSE(webvpn_from_cookie_text("").ok());
    CHECK_FALSE(webvpn_from_cookie_text("  ; ").ok());
    auto no_webvpn = webvpn_from_cookie_text("openconnect_strapkey=abc");
    REQUIRE_FALSE(no_webvpn.ok());
    CHECK(no_webvpn.error().message.find("webvpn") != std::string::npos);
    CHECK_FALSE(webvpn_from_cookie_text("webvpn=").ok());
}

TEST_CASE("client certificate requests: Cisco's XML element, ocserv's 401") {
    // Cisco: the request may come as a config-auth with no <auth> at all.
    auto bare = must_parse(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<config-auth client=\"vpn\" type=\"auth-request\" aggregate-auth-version=\"2\">"
        "<client-cert-request/></config-auth>");
    CHECK(bare.client_cert_requested);
    CHECK(bare.fields.empty());
    CHECK_FALSE(bare.success());

    auto with_form = must_parse(
        "<config-auth client=\"vpn\" type=\"auth-request\"><auth id=\"main\"><message>Certificate needed</message>"
        "<form method=\"post\" action=\"/\"></form></auth><multiple-client-cert-request>"
        "<hash-algorithm>sha256</hash-algorithm></multiple-client-cert-request></config-auth>");
    CHECK(with_form.client_cert_requested);
    CHECK(with_form.message == "Certificate needed");

    // Absent from ocserv's ordinary forms.
    CHECK_FALSE(must_parse(fixture("ocserv_username_form.xml")).client_cert_requested);
    // A request element does not make a complete document without <auth> acceptable.
    CHECK(error_of("<config-auth type=\"complete\"><client-cert-request/></config-auth>").find("no <auth>") !=
          std::string::npos);

    CHECK(refusal_names_certificate("No certificate"));
    CHECK(refusal_names_certificate("Client CERTIFICATE required"));
    CHECK_FALSE(refusal_names_certificate("Authentication failed"));
    CHECK_FALSE(refusal_names_certificate(""));

    std::string none = client_certificate_error("vpn.test", std::nullopt);
    CHECK(none.find("vpn.test wants a client certificate") != std::string::npos);
    CHECK(none.find("-c/--certificate") != std::string::npos);
    std::string refused = client_certificate_error("vpn.test", std::string("UID=testuser,CN=testuser"));
    CHECK(refused.find("vpn.test refused the client certificate \"UID=testuser,CN=testuser\"") != std::string::npos);
    CHECK(refused.find("wants") == std::string::npos);
    CHECK(client_certificate_error("vpn.test", std::string()).find("refused the client certificate (") !=
          std::string::npos);
}

TEST_CASE("single sign-on: capabilities only for the flows a browser can finish, the sso-v2 form, <sso-token>") {
    AcClientInfo client;
    client.group_access = "https://vpn.example.com/";
    // No browser configured: no <capabilities> at all (a server seeing one may insist on SSO).
    CHECK(build_init_request(client).find("capabilities") == std::string::npos);
    client.sso_v2 = true;
    CHECK(build_init_request(client).find(
              "<capabilities><auth-method>single-sign-on-v2</auth-method></capabilities>") != std::string::npos);
    client.sso_v2 = false;
    client.sso_external = true;
    CHECK(build_init_request(client).find("<capabilities><auth-method>single-sign-on-external-browser</auth-method>"
                                          "</capabilities>") != std::string::npos);
    client.sso_external = false;

    // As an ASA sends it (the URLs' & as &#x26;), the group list beside the sso input.
    const std::string form = R"(<?xml version="1.0" encoding="UTF-8"?>
<config-auth client="vpn" type="auth-request" aggregate-auth-version="2">
<opaque is-for="sg"><tunnel-group>SAML</tunnel-group><auth-method>single-sign-on-v2</auth-method></opaque>
<auth id="main"><title>Login</title><message>Please complete the authentication process in the AnyConnect Login window.</message>
<sso-v2-login>https://vpn.example.com/+CSCOE+/saml/sp/login?tgname=SAML&#x26;acsamlcap=v2</sso-v2-login>
<sso-v2-login-final>https://vpn.example.com/+CSCOE+/saml_ac_login.html</sso-v2-login-final>
<sso-v2-logout>https://vpn.example.com/+CSCOE+/saml/sp/logout</sso-v2-logout>
<sso-v2-token-cookie-name>acSamlv2Token</sso-v2-token-cookie-name>
<sso-v2-error-cookie-name>acSamlv2Error</sso-v2-error-cookie-name>
<form><input type="sso" name="sso-token"></input>
<select name="group_list" label="GROUP:"><option>SAML</option></select></form></auth></config-auth>)";
    AcAuthReply r = must_parse(form);
    REQUIRE(r.sso);
    CHECK(r.sso->login == "https://vpn.example.com/+CSCOE+/saml/sp/login?tgname=SAML&acsamlcap=v2");
    CHECK(r.sso->login_final == "https://vpn.example.com/+CSCOE+/saml_ac_login.html");
    CHECK(r.sso->logout == "https://vpn.example.com/+CSCOE+/saml/sp/logout");
    CHECK(r.sso->token_cookie == "acSamlv2Token");
    CHECK(r.sso->error_cookie == "acSamlv2Error");
    CHECK_FALSE(r.sso->external());
    REQUIRE(r.field("sso-token"));
    CHECK(r.field("sso-token")->kind == AcFormField::Kind::sso);
    CHECK(r.group_list());

    std::string external = form;
    external.replace(external.find("<form>"), 6, "<sso-v2-browser-mode>external</sso-v2-browser-mode><form>");
    CHECK(must_parse(external).sso->external());
    std::string no_cookie = form;
    const std::string cookie_element = "<sso-v2-token-cookie-name>acSamlv2Token</sso-v2-token-cookie-name>";
    no_cookie.erase(no_cookie.find(cookie_element), cookie_element.size());
    CHECK(error_of(no_cookie).find("sso-v2-token-cookie-name") != std::string::npos);
    CHECK_FALSE(must_parse(fixture("ocserv_username_form.xml")).sso);

    // The token goes back as <sso-token> inside <auth>, the opaque echoed.
    std::vector<AcFieldValue> fields;
    fields.push_back({"sso-token", Secret::from_string("TOKEN123")});
    Secret reply = build_auth_reply(client, fields, "SAML", r.opaque);
    CHECK(reply.reveal_text().find("<auth><sso-token>TOKEN123</sso-token></auth><group-select>SAML</group-select>") !=
          std::string_view::npos);
    CHECK(reply.reveal_text().find("<tunnel-group>SAML</tunnel-group>") != std::string_view::npos);
}

TEST_CASE("STRAP: the external-browser token encrypted to the client's key (vector from Python cryptography)") {
    // Client scalar 1f2e3d...1718; the blob made by pyca/cryptography: server key 0a1b2c...0e0f10, ECDH,
    // HKDF-SHA256(no salt, "AC_ECIES"), AES-256-GCM, IV 00..0b, tag cut to 12 bytes, token
    // "A1b2C3d4E5f6TOKEN" (tests/unit/protocols/anyconnect/strap_vector.py writes it again).
    const std::uint8_t scalar[32] = {0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88, 0x01, 0x02, 0x03,
                                     0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
                                     0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
    auto key = crypto::EciesP256Key::from_scalar(scalar);
    REQUIRE(key.ok());
    CHECK(key->public_key_base64() ==
          "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAElFuvv+Sbv/5cM9Sc0IPadc6AWq8fKoLPsBDgloFjWCpA9/aSoyUGniLMD+BMDmgyL0RZ5FEG1UMl7iO4xmvRhA==");
    const std::string blob =
        "AAEAAQBbMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEiOpbKcrS47MFbNcjl1rTwfyXdSp52SRlIcqCpn3Uoo4BYXXOwkK1d4yRjCXo3o2KFS0I6l"
        "wqIu4zvMIuWaDwPgACAAyqVT2b7YX1FKAcbj8AAwAR+6uESy3QTZg6hq0mHKIfGkMABAAMAAECAwQFBgcICQoL";
    auto opened = open_strap_token(*key, blob);
    REQUIRE(opened.ok());
    REQUIRE(opened->has_value());
    CHECK((*opened)->reveal_text() == "A1b2C3d4E5f6TOKEN");
    // As the loopback request carries it: the path, percent-encoded, with ?return=.
    std::string path = "/api/sso/";
    for (char c : blob) path += c == '+' ? std::string("%2B") : c == '/' ? std::string("%2F") : std::string(1, c);
    auto from_path = open_strap_token(*key, path + "?return=https%3A%2F%2Fvpn.example.com%2F");
    REQUIRE(from_path.ok());
    CHECK((*from_path)->reveal_text() == "A1b2C3d4E5f6TOKEN");
    // Another client's key, a changed byte: refused. A plain token: not a blob (std::nullopt).
    auto other = crypto::EciesP256Key::generate();
    REQUIRE(other.ok());
    CHECK(open_strap_token(*other, blob).error().message.find("GCM tag mismatch") != std::string::npos);
    std::string bad = blob;
    bad[bad.size() - 30] = bad[bad.size() - 30] == 'A' ? 'B' : 'A';
    CHECK_FALSE(open_strap_token(*key, bad).ok());
    auto plain = open_strap_token(*key, "0123456789abcdef0123456789abcdef");
    REQUIRE(plain.ok());
    CHECK_FALSE(plain->has_value());
    CHECK(other->public_key_base64() != key->public_key_base64());
    CHECK(other->public_key_base64().rfind("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE", 0) == 0);
}

TEST_CASE("multiple-certificate authentication: capability only with a second certificate, the request, the reply") {
    AcClientInfo client;
    client.group_access = "https://vpn.test/";
    CHECK(build_init_request(client).find("multiple-cert") == std::string::npos);
    client.multiple_cert = true;
    CHECK(build_init_request(client).find(
              "<capabilities><auth-method>multiple-cert</auth-method></capabilities>") != std::string::npos);

    const std::string body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<config-auth client=\"vpn\" type=\"auth-request\" aggregate-auth-version=\"2\">"
        "<opaque is-for=\"sg\"><tunnel-group>MCA</tunnel-group></opaque>"
        "<multiple-client-cert-request><hash-algorithm>SHA256</hash-algorithm><hash-algorithm>sha384</hash-algorithm>"
        "</multiple-client-cert-request><random>FA4003BD87</random><cert-authenticated/></config-auth>";
    auto r = must_parse(body);
    REQUIRE(r.mca);
    CHECK_FALSE(r.client_cert_requested);  // the machine certificate was accepted
    CHECK(r.mca->cert_authenticated);
    CHECK(r.mca->hashes == std::vector<std::string>{"sha256", "sha384"});
    CHECK(r.mca->signed_document == body);  // byte for byte: the signature covers it
    CHECK(r.opaque == "<opaque is-for=\"sg\"><tunnel-group>MCA</tunnel-group></opaque>");
    CHECK(*choose_mca_hash(*r.mca) == "sha384");  // the strongest offered, as openconnect
    AcMcaRequest sha1_only;
    sha1_only.hashes = {"sha1"};
    CHECK(choose_mca_hash(sha1_only).error().message.find("offers sha1") != std::string::npos);

    std::string reply = build_mca_reply(client, r.opaque, "MIIB\nAAAA", "sha384", "c2ln");
    CHECK(reply.find("type=\"auth-reply\"") != std::string::npos);
    CHECK(reply.find("<opaque is-for=\"sg\">") != std::string::npos);
    CHECK(reply.find("<client-cert-chain cert-store=\"1M\"><client-cert-sent-via-protocol/></client-cert-chain>") !=
          std::string::npos);
    CHECK(reply.find("<client-cert-chain cert-store=\"1U\"><client-cert cert-format=\"pkcs7\">MIIB\nAAAA</client-cert>"
                     "<client-cert-auth-signature hash-algorithm-chosen=\"sha384\">c2ln</client-cert-auth-signature>") !=
          std::string::npos);
    CHECK(xml::Document::parse(reply).ok());  // well-formed
}
