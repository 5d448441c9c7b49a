#include <doctest/doctest.h>

#include "crypto/cpu_features.h"
#include "crypto/suites.h"

using namespace espvpn;

TEST_CASE("every GlobalProtect ESP suite is available in this GnuTLS") {
    const auto& suites = known_esp_suites();
    CHECK(suites.size() == 8);
    for (const auto& s : suites) {
        CAPTURE(s.enc);
        CAPTURE(s.auth);
        CHECK(suite_available(s));
    }
}

TEST_CASE("unknown suites are reported unavailable") {
    CHECK_FALSE(suite_available({"des-cbc", "sha1"}));
    CHECK_FALSE(suite_available({"aes-128-cbc", "whirlpool"}));
}

TEST_CASE("CPU feature description names every flag") {
    std::string d = describe(detect_cpu_features());
    for (const char* name : {"AES-NI", "PCLMUL", "SHA-NI", "AVX2"}) {
        CAPTURE(name);
        CHECK(d.find(name) != std::string::npos);
    }
}
