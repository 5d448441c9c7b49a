// --servercert spellings and prefix matching (src/io/server_pin.h), as openconnect
// 9 matches them; the digests of certs/server.pem are checked against openssl in
// tests/integration/gp_login (servercert case).
#include <doctest/doctest.h>

#include <gnutls/gnutls.h>

#include <fstream>
#include <sstream>

#include "src/io/server_pin.h"
#include "src/io/tls_stream.h"

using namespace espvpn;
using namespace espvpn::io;

namespace {

ServerFingerprints sample() {
    ServerFingerprints fp;
    fp.pin_sha256 = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/AbCd=";
    fp.sha256_hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    fp.sha1_hex = "a1b2c3d4e5f60718293a4b5c6d7e8f9001122334";
    fp.cert_sha1_hex = "ffeeddccbbaa99887766554433221100ffeeddcc";
    return fp;
}

bool match(const char* text) {
    auto pin = parse_server_cert_pin(text);
    REQUIRE_MESSAGE(pin, (pin ? "" : pin.error().message));
    return pin->matches(sample());
}

}  // namespace

TEST_CASE("servercert: every spelling, whole or a prefix of at least 4 characters") {
    CHECK(match("pin-sha256:AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/AbCd="));
    CHECK(match("pin-sha256:AbCd"));
    CHECK_FALSE(match("pin-sha256:abcd"));  // base64 is case-sensitive
    CHECK(match("sha256:00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff"));
    CHECK(match("sha256:0011"));
    CHECK_FALSE(match("sha256:0012"));
    CHECK(match("sha1:A1B2C3D4"));
    CHECK(match("sha1:a1b2c3d4e5f60718293a4b5c6d7e8f9001122334"));
    CHECK_FALSE(match("sha1:ffee"));          // that is the certificate's SHA-1, not the key's
    CHECK(match("ffeeddccbbaa99887766554433221100ffeeddcc"));
    CHECK(match("FFEEDD"));
    CHECK_FALSE(match("a1b2c3d4"));           // bare hex is the certificate's SHA-1
}

TEST_CASE("servercert: refused spellings say why") {
    for (const char* bad : {"abc", "sha1:abc", "pin-sha256:AbC", "md5:00112233", "sha256:00zz11",
                            "pin-sha256:Ab$d", "sha1:a1b2c3d4e5f60718293a4b5c6d7e8f900112233400"}) {
        CAPTURE(bad);
        auto pin = parse_server_cert_pin(bad);
        CHECK_FALSE(pin);
    }
    CHECK(parse_server_cert_pin("md5:0011").error().message.find("unknown fingerprint type") != std::string::npos);
    CHECK(parse_server_cert_pin("sha1:ab").error().message.find("from 4 to 40") != std::string::npos);
    TlsClientConfig c;
    c.system_trust = false;
    c.server_pins = {"pin-sha256:AbCd", "sha1:nothex"};
    auto creds = TlsCredentials::load(c);
    REQUIRE_FALSE(creds);
    CHECK(creds.error().message.find("sha1:nothex") != std::string::npos);
}

TEST_CASE("servercert: several fingerprints, any one matching accepts") {
    TlsClientConfig c;
    c.system_trust = false;
    c.server_pins = {"sha1:0000", "sha256:0011"};
    auto creds = TlsCredentials::load(c);
    REQUIRE(creds);
    CHECK((*creds)->pin_matches(sample()));
    c.server_pins = {"sha1:0000", "pin-sha256:zzzz"};
    auto none = TlsCredentials::load(c);
    REQUIRE(none);
    CHECK_FALSE((*none)->pin_matches(sample()));
}

TEST_CASE("fingerprints_of certs/server.pem: the four digests are consistent") {
    std::ifstream in(std::string(ESPVPN_CERT_DIR) + "/server.pem");
    std::stringstream pem;
    pem << in.rdbuf();
    std::string text = pem.str();
    gnutls_datum_t in_d{reinterpret_cast<unsigned char*>(text.data()), static_cast<unsigned>(text.size())};
    gnutls_datum_t der{};
    REQUIRE(gnutls_pem_base64_decode2("CERTIFICATE", &in_d, &der) >= 0);
    auto fp = fingerprints_of(der);
    gnutls_free(der.data);
    REQUIRE(fp);
    CHECK(fp->pin_sha256.size() == 44);
    CHECK(fp->sha256_hex.size() == 64);
    CHECK(fp->sha1_hex.size() == 40);
    CHECK(fp->cert_sha1_hex.size() == 40);
    CHECK(fp->sha1_hex != fp->cert_sha1_hex);
    auto whole = parse_server_cert_pin(fp->pin());
    REQUIRE(whole);
    CHECK(whole->matches(*fp));
    auto hex = parse_server_cert_pin("sha256:" + fp->sha256_hex.substr(0, 8));
    REQUIRE(hex);
    CHECK(hex->matches(*fp));
    CHECK(fp->all_forms().find("sha1:" + fp->sha1_hex) != std::string::npos);
}
