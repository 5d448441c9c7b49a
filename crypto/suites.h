// The ESP cipher suites GlobalProtect negotiates, by the names its getconfig
// reply uses, and whether this build's crypto library can run each one.
#pragma once

#include <string_view>
#include <vector>

namespace espvpn {

struct EspSuiteName {
    std::string_view enc;   // GlobalProtect <enc-algo>: aes-128-cbc, aes-256-gcm, ...
    std::string_view auth;  // GlobalProtect <hmac-algo>: sha1, sha256, md5; "" for AEAD
};

// Every suite espvpn knows, in preference order.
const std::vector<EspSuiteName>& known_esp_suites();

// Asks GnuTLS whether the primitives of a suite can actually be instantiated.
bool suite_available(const EspSuiteName& suite);

}  // namespace espvpn
