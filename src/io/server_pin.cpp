#include "src/io/server_pin.h"

#include <algorithm>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>

#include <cctype>

#include "protocols/base/hex.h"

namespace espvpn::io {

namespace {

constexpr std::size_t kMinMatch = 4;  // openconnect's minimum

std::string base64_of(const unsigned char* p, std::size_t n) {
    gnutls_datum_t in{const_cast<unsigned char*>(p), static_cast<unsigned>(n)};
    gnutls_datum_t out{};
    if (gnutls_base64_encode2(&in, &out) < 0) return {};
    std::string text(reinterpret_cast<char*>(out.data), out.size);
    gnutls_free(out.data);
    return text;
}

bool is_base64_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
}

}  // namespace

std::string ServerFingerprints::all_forms() const {
    return pin() + ", sha256:" + sha256_hex + ", sha1:" + sha1_hex + ", or the certificate's SHA-1 " + cert_sha1_hex;
}

Result<ServerFingerprints> fingerprints_of(const gnutls_datum_t& der) {
    gnutls_x509_crt_t crt = nullptr;
    gnutls_pubkey_t key = nullptr;
    gnutls_datum_t spki{};
    unsigned char s256[32], s1[20], c1[20];
    int rc = gnutls_x509_crt_init(&crt);
    if (rc >= 0) rc = gnutls_x509_crt_import(crt, &der, GNUTLS_X509_FMT_DER);
    if (rc >= 0) rc = gnutls_pubkey_init(&key);
    if (rc >= 0) rc = gnutls_pubkey_import_x509(key, crt, 0);
    if (rc >= 0) rc = gnutls_pubkey_export2(key, GNUTLS_X509_FMT_DER, &spki);
    if (rc >= 0) rc = gnutls_hash_fast(GNUTLS_DIG_SHA256, spki.data, spki.size, s256);
    if (rc >= 0) rc = gnutls_hash_fast(GNUTLS_DIG_SHA1, spki.data, spki.size, s1);
    if (rc >= 0) rc = gnutls_hash_fast(GNUTLS_DIG_SHA1, der.data, der.size, c1);
    gnutls_free(spki.data);
    if (key) gnutls_pubkey_deinit(key);
    if (crt) gnutls_x509_crt_deinit(crt);
    if (rc < 0) return make_error(std::string("cannot read the server certificate's public key: ") + gnutls_strerror(rc));
    ServerFingerprints fp;
    fp.pin_sha256 = base64_of(s256, sizeof s256);
    fp.sha256_hex = hex_encode({s256, sizeof s256});
    fp.sha1_hex = hex_encode({s1, sizeof s1});
    fp.cert_sha1_hex = hex_encode({c1, sizeof c1});
    unsigned char md5[16];
    if (gnutls_hash_fast(GNUTLS_DIG_MD5, der.data, der.size, md5) >= 0) fp.cert_md5_hex = hex_encode({md5, sizeof md5});
    return fp;
}

bool ServerCertPin::matches(const ServerFingerprints& fp) const {
    const std::string* full = nullptr;
    switch (kind) {
        case Kind::pin_sha256: full = &fp.pin_sha256; break;
        case Kind::sha256: full = &fp.sha256_hex; break;
        case Kind::sha1: full = &fp.sha1_hex; break;
        case Kind::cert_sha1: full = &fp.cert_sha1_hex; break;
    }
    return digest.size() >= kMinMatch && digest.size() <= full->size() && full->compare(0, digest.size(), digest) == 0;
}

unsigned ServerCertPin::bits() const {
    const bool base64 = kind == Kind::pin_sha256;
    const unsigned digest_bits = kind == Kind::pin_sha256 || kind == Kind::sha256 ? 256 : 160;
    std::size_t chars = digest.size();
    if (base64)
        while (chars > 0 && digest[chars - 1] == '=') --chars;  // padding fixes nothing
    return static_cast<unsigned>(std::min<std::size_t>(chars * (base64 ? 6 : 4), digest_bits));
}

Result<ServerCertPin> parse_server_cert_pin(std::string_view text) {
    ServerCertPin pin;
    std::string_view value = text;
    std::size_t full = 0;
    if (text.rfind("pin-sha256:", 0) == 0) {
        pin.kind = ServerCertPin::Kind::pin_sha256;
        value.remove_prefix(11);
        full = 44;
    } else if (text.rfind("sha256:", 0) == 0) {
        pin.kind = ServerCertPin::Kind::sha256;
        value.remove_prefix(7);
        full = 64;
    } else if (text.rfind("sha1:", 0) == 0) {
        pin.kind = ServerCertPin::Kind::sha1;
        value.remove_prefix(5);
        full = 40;
    } else if (text.find(':') == std::string_view::npos) {
        pin.kind = ServerCertPin::Kind::cert_sha1;
        full = 40;
    } else {
        return make_error("--servercert \"" + std::string(text) +
                          "\": unknown fingerprint type (use pin-sha256:BASE64, sha256:HEX, sha1:HEX or the "
                          "certificate's SHA-1 in hex)");
    }
    const bool base64 = pin.kind == ServerCertPin::Kind::pin_sha256;
    for (char c : value) {
        if (base64 ? !is_base64_char(c) : !std::isxdigit(static_cast<unsigned char>(c)))
            return make_error("--servercert \"" + std::string(text) + "\": '" + std::string(1, c) + "' is not a " +
                              (base64 ? "base64" : "hex") + " digit");
        pin.digest += base64 ? c : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (pin.digest.size() < kMinMatch || pin.digest.size() > full)
        return make_error("--servercert \"" + std::string(text) + "\": the fingerprint must have from " +
                          std::to_string(kMinMatch) + " to " + std::to_string(full) + " characters");
    return pin;
}

}  // namespace espvpn::io
