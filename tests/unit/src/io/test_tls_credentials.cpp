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
