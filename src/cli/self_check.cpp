#include "src/cli/self_check.h"

#include <gnutls/gnutls.h>
#include <libxml/xmlversion.h>
#include <nettle/version.h>

#include <ostream>

#include "crypto/aes_gcm.h"
#include "crypto/cpu_features.h"
#include "crypto/suites.h"
#include "protocols/anyconnect/connect.h"

namespace espvpn::cli {

void print_version(std::ostream& out) {
    // The lines openconnect --version prints, with espvpn's answers.
    const char* gnutls = gnutls_check_version(nullptr);
    out << "espvpn version " << ESPVPN_VERSION << " (for openconnect's gp and anyconnect protocols)\n";
    out << "Using GnuTLS " << (gnutls ? gnutls : "?") << ", Nettle " << nettle_version_major() << "."
        << nettle_version_minor() << ", libxml2 " << LIBXML_DOTTED_VERSION
        << ". Features present: DTLS, ESP, HTTPS tunnel fallback, PKCS#12 and PEM client certificates, "
           "PKCS#11 tokens (pkcs11: URIs via p11-kit; TPM2 keys via tpm2-pkcs11), "
           "HTTP and SOCKS5 proxies, HIP report program, built-in tun/route/DNS setup, NetworkManager plugin\n";
    out << "Not built in: TPM2 key files (tpmkey:, TSS2 PEM), Yubikey OATH, libproxy (PAC/WPAD), "
           "compression, XML profiles, --script-tun\n";
    out << "Supported protocols: anyconnect (default), gp\n";
    out << "ESP ciphers (gp):";
    for (const auto& s : known_esp_suites())
        if (suite_available(s)) out << " " << s.enc << (s.auth.empty() ? "" : "+hmac-") << s.auth;
    out << "\n";
    const anyconnect::AcDtlsOffer offer;
    out << "DTLS ciphers (anyconnect): " << offer.cipher_suites << "; DTLS 1.2: " << offer.dtls12_cipher_suites << "\n";
    out << "Default vpnc-script: none; without --script espvpn sets up addresses, routes and DNS itself\n";
}

bool run_self_check(std::ostream& out) {
    bool ok = true;
    const char* gnutls = gnutls_check_version("3.7.0");
    out << "espvpn " << ESPVPN_VERSION << " self-check\n";
    out << "  GnuTLS:  " << (gnutls ? gnutls : "too old (need >= 3.7.0)") << "\n";
    if (!gnutls) ok = false;
    out << "  Nettle:  " << nettle_version_major() << "." << nettle_version_minor() << "\n";
    out << "  libxml2: " << LIBXML_DOTTED_VERSION << "\n";
    out << "  CPU:     " << describe(detect_cpu_features()) << "\n";
    out << "  AES-GCM: " << AesGcm::name(AesGcm::chosen()) << " (ESPVPN_GCM_VAES in espvpn(8))\n";
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
