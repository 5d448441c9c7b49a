#include <doctest/doctest.h>

#include "protocols/base/pkcs11_uri.h"

using namespace espvpn;

TEST_CASE("printable_key_name: a PKCS#11 URI loses pin-value and pin-source, wherever they are") {
    CHECK(printable_key_name("pkcs11:token=t;object=k?pin-value=1234") == "pkcs11:token=t;object=k");
    CHECK(printable_key_name("pkcs11:token=t;object=k?module-name=softhsm2&pin-value=1234") ==
          "pkcs11:token=t;object=k?module-name=softhsm2");
    CHECK(printable_key_name("pkcs11:token=t?pin-source=file:/run/pin&module-name=m&pin-value=9") ==
          "pkcs11:token=t?module-name=m");
    // p11-kit also reads them in the path; the scheme and names in any case; percent-encoded names.
    CHECK(printable_key_name("PKCS11:token=t;pin-value=1234;object=k") == "PKCS11:token=t;object=k");
    CHECK(printable_key_name("pkcs11:token=t;PIN-Value=1234") == "pkcs11:token=t");
    CHECK(printable_key_name("pkcs11:token=t?pin%2dvalue=1234") == "pkcs11:token=t");
    CHECK(printable_key_name("pkcs11:token=t?%70in-source=|cat") == "pkcs11:token=t");
    // A value that merely contains the word stays; a name that only starts like it stays.
    CHECK(printable_key_name("pkcs11:object=pin-value?module-name=x") == "pkcs11:object=pin-value?module-name=x");
    CHECK(printable_key_name("pkcs11:token=t?pin-values=x") == "pkcs11:token=t?pin-values=x");
    CHECK(printable_key_name("pkcs11:") == "pkcs11:");
    CHECK(printable_key_name("pkcs11:?pin-value=1") == "pkcs11:");
}

TEST_CASE("printable_key_name: file names are printed as they are") {
    CHECK(printable_key_name("/etc/ssl/client.pem") == "/etc/ssl/client.pem");
    CHECK(printable_key_name("dir/pkcs11:x?pin-value=1") == "dir/pkcs11:x?pin-value=1");
    CHECK(printable_key_name("") == "");
}

TEST_CASE("pkcs11_uri_has_pin: a URI that carries its PIN needs no prompt") {
    CHECK(pkcs11_uri_has_pin("pkcs11:token=t?pin-value=1234"));
    CHECK(pkcs11_uri_has_pin("pkcs11:token=t?pin-source=file:/x"));
    CHECK_FALSE(pkcs11_uri_has_pin("pkcs11:token=t;object=k"));
    CHECK_FALSE(pkcs11_uri_has_pin("/tmp/pin-value=1"));
    CHECK(is_pkcs11_uri("Pkcs11:x"));
    CHECK_FALSE(is_pkcs11_uri("/tmp/k.pem"));
}
