#include "src/cli/self_check.h"

#include <gnutls/gnutls.h>
#include <libxml/xmlversion.h>
#include <nettle/version.h>

#include <ostream>

#include "crypto/cpu_features.h"
#include "crypto/suites.h"

namespace espvpn::cli {

bool run_self_check(std::ostream& out) {
    bool ok = true;
    const char* gnutls = gnutls_check_version("3.7.0");
    out << "espvpn " << ESPVPN_VERSION << " self-check\n";
    out << "  GnuTLS:  " << (gnutls ? gnutls : "too old (need >= 3.7.0)") << "\n";
    if (!gnutls) ok = false;
    out << "  Nettle:  " << nettle_version_major() << "." << nettle_version_minor() << "\n";
    out << "  libxml2: " << LIBXML_DOTTED_VERSION << "\n";
    out << "  CPU:     " << describe(detect_cpu_features()) << "\n";
    out << "  ESP suites (GlobalProtect names):\n";
    int available = 0;
    for (const auto& s : known_esp_suites()) {
        bool have = suite_available(s);
        available += have;
        out << "    " << s.enc;
        if (!s.auth.empty()) out << " + hmac-" << s.auth;
        out << (have ? "  available" : "  NOT available in this GnuTLS") << "\n";
    }
    if (available == 0) ok = false;
    out << (ok ? "self-check passed\n" : "self-check FAILED\n");
    return ok;
}

}  // namespace espvpn::cli
