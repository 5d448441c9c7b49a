// Client certificate loading: which files need a pass phrase, and the subject
// named in errors when a server refuses the certificate (certs/, make-certs).
#include <doctest/doctest.h>

#include "src/io/tls_stream.h"

using namespace espvpn;
using namespace espvpn::io;

namespace {

TlsClientConfig with_cert(const std::string& cert, const std::string& key = {}, const std::string& password = {}) {
    TlsClientConfig c;
    c.system_trust = false;
    c.client_cert_file = std::string(ESPVPN_CERT_DIR) + "/" + cert;
    if (!key.empty()) c.client_key_file = std::string(ESPVPN_CERT_DIR) + "/" + key;
    if (!password.empty()) c.key_password = Secret::from_string(password);
    return c;
}

}  // namespace

TEST_CASE("client_key_needs_password: only a locked key without -p") {
    CHECK(client_key_needs_password(with_cert("client.p12")));
    CHECK_FALSE(client_key_needs_password(with_cert("client.p12", {}, "espvpn-p12")));
    CHECK_FALSE(client_key_needs_password(with_cert("client.p12", {}, "wrong")));  // load reports that one
    CHECK_FALSE(client_key_needs_password(with_cert("client.pem", "client-key.pem")));
    CHECK_FALSE(client_key_needs_password(with_cert("no-such-file.p12")));  // missing: the loader's error
    CHECK_FALSE(client_key_needs_password(TlsClientConfig{}));
}

TEST_CASE("TlsCredentials: the client certificate's subject, or a clear load error") {
    auto pem = TlsCredentials::load(with_cert("client.pem", "client-key.pem"));
    REQUIRE(pem.ok());
    CHECK((*pem)->client_subject() == "UID=testuser,CN=testuser,O=espvpn tests");
    auto p12 = TlsCredentials::load(with_cert("client.p12", {}, "espvpn-p12"));
    REQUIRE(p12.ok());
    CHECK((*p12)->client_subject() == (*pem)->client_subject());
    TlsClientConfig none;
    none.system_trust = false;
    auto without = TlsCredentials::load(none);
    REQUIRE(without.ok());
    CHECK((*without)->client_subject().empty());

    auto locked = TlsCredentials::load(with_cert("client.p12"));
    REQUIRE_FALSE(locked.ok());
    CHECK(locked.error().message.find("no password given: -p/--key-password") != std::string::npos);
    auto wrong = TlsCredentials::load(with_cert("client.p12", {}, "wrong"));
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.error().message.find("wrong password?") != std::string::npos);
}

TEST_CASE("token_pin_callback: the PIN on the first attempt only, never again after a refusal") {
    TokenPin state;
    state.pin = Secret::from_string("1234");
    char pin[32] = {};
    REQUIRE(token_pin_callback(&state, 0, "pkcs11:token=t", "t", 0, pin, sizeof pin) == 0);
    CHECK(std::string(pin) == "1234");
    CHECK_FALSE(state.refused);
    // GnuTLS asks again after CKR_PIN_INCORRECT: attempt 1 and/or GNUTLS_PIN_WRONG. Refused.
    char again[32] = {};
    CHECK(token_pin_callback(&state, 1, "pkcs11:token=t", "t", GNUTLS_PIN_WRONG, again, sizeof again) < 0);
    CHECK(state.refused);
    CHECK(std::string(again).empty());
    TokenPin wrong_flag;
    wrong_flag.pin = Secret::from_string("1234");
    CHECK(token_pin_callback(&wrong_flag, 0, "pkcs11:token=t", "t", GNUTLS_PIN_WRONG, again, sizeof again) < 0);
    // A later login of the same key (a key that wants the PIN per signature) gets it again.
    CHECK(token_pin_callback(&state, 0, "pkcs11:token=t", "t", GNUTLS_PIN_CONTEXT_SPECIFIC, pin, sizeof pin) == 0);
    // No PIN held: nothing given, noted as asked (the caller prompts or names -p).
    TokenPin none;
    CHECK(token_pin_callback(&none, 0, "pkcs11:token=t", "t", 0, pin, sizeof pin) < 0);
    CHECK(none.asked);
    // A PIN longer than GnuTLS's buffer is not truncated into a wrong try.
    TokenPin long_pin;
    long_pin.pin = Secret::from_string(std::string(40, '7'));
    CHECK(token_pin_callback(&long_pin, 0, "pkcs11:token=t", "t", 0, pin, sizeof pin) < 0);
}

TEST_CASE("client_key_needs_password: a token URI that carries its PIN is not tried (no PIN try spent)") {
    TlsClientConfig c;
    c.system_trust = false;
    c.client_cert_file = "pkcs11:token=no-such-token;object=k?pin-value=1234";
    CHECK_FALSE(client_key_needs_password(c));
    c.client_cert_file = "pkcs11:token=no-such-token;object=k";
    c.key_password = Secret::from_string("1234");
    CHECK_FALSE(client_key_needs_password(c));
}
