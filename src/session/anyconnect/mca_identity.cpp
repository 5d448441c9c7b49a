#include "src/session/anyconnect/mca_identity.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/pkcs7.h>
#include <gnutls/x509.h>
#include <nettle/base64.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "protocols/base/pkcs11_uri.h"

namespace espvpn::session {

namespace {

std::string base64_lines(const unsigned char* data, std::size_t size) {
    std::string flat(BASE64_ENCODE_RAW_LENGTH(size), '\0');
    nettle_base64_encode_raw(flat.data(), size, data);
    // 64 characters a line, as openconnect sends it.
    std::string out;
    for (std::size_t i = 0; i < flat.size(); i += 64) {
        if (i) out += '\n';
        out.append(flat, i, 64);
    }
    return out;
}

bool file_is_pem(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return head.find("-----BEGIN") != std::string::npos;
}

std::string message(int rc) { return gnutls_strerror(rc); }

}  // namespace

struct McaIdentity::Gnutls {
    gnutls_privkey_t key = nullptr;
    gnutls_pk_algorithm_t pk = GNUTLS_PK_UNKNOWN;
    ~Gnutls() {
        if (key) gnutls_privkey_deinit(key);
    }
};

McaIdentity::~McaIdentity() = default;

Result<std::shared_ptr<const McaIdentity>> McaIdentity::load(const std::string& cert_file, const std::string& key_file,
                                                             const Secret& password) {
    const std::string& key_path = key_file.empty() ? cert_file : key_file;
    const std::string cert_name = printable_key_name(cert_file);
    const std::string key_name = printable_key_name(key_path);
    // The MCA signature is made here with the key exported from GnuTLS's credentials,
    // which a token's key never is: tokens are for -c/-k only, said plainly.
    if (is_pkcs11_uri(cert_file) || is_pkcs11_uri(key_path))
        return make_error("the MCA certificate " + cert_name + ": keys on a PKCS#11 token work with -c/-k, "
                          "not yet with --mca-certificate/--mca-key");
    if (std::ifstream probe(cert_file); !probe) return make_error("cannot read the MCA certificate " + cert_name);
    if (std::ifstream probe(key_path); !probe) return make_error("cannot read the MCA key " + key_name);

    gnutls_certificate_credentials_t cred = nullptr;
    if (int rc = gnutls_certificate_allocate_credentials(&cred); rc < 0) return make_error("GnuTLS: " + message(rc));
    struct FreeCred {
        gnutls_certificate_credentials_t c;
        ~FreeCred() { gnutls_certificate_free_credentials(c); }
    } free_cred{cred};
    Secret pass(password.size() + 1);  // NUL-terminated for GnuTLS
    std::copy(password.reveal().begin(), password.reveal().end(), pass.reveal_mutable().begin());
    const char* p = password.empty() ? nullptr : reinterpret_cast<const char*>(pass.reveal().data());
    // GnuTLS checks that the key belongs to the certificate (GNUTLS_E_CERTIFICATE_KEY_MISMATCH).
    int rc = file_is_pem(cert_file)
                 ? gnutls_certificate_set_x509_key_file2(cred, cert_file.c_str(), key_path.c_str(), GNUTLS_X509_FMT_PEM, p, 0)
                 : gnutls_certificate_set_x509_simple_pkcs12_file(cred, cert_file.c_str(), GNUTLS_X509_FMT_DER, p);
    if (rc < 0) {
        std::string hint;
        if (rc == GNUTLS_E_DECRYPTION_FAILED || rc == GNUTLS_E_MAC_VERIFY_FAILED)
            hint = p ? " (wrong --mca-key-password?)" : " (the key is encrypted: give --mca-key-password)";
        return make_error("cannot load the MCA certificate " + cert_name + " with key " + key_name + ": " + message(rc) +
                          hint);
    }

    std::shared_ptr<McaIdentity> self(new McaIdentity());
    self->g_ = std::make_unique<Gnutls>();
    gnutls_x509_crt_t* chain = nullptr;
    unsigned int length = 0;
    if (rc = gnutls_certificate_get_x509_crt(cred, 0, &chain, &length); rc < 0 || length == 0)
        return make_error("the MCA certificate " + cert_name + " holds no certificate");
    struct FreeChain {
        gnutls_x509_crt_t* c;
        unsigned int n;
        ~FreeChain() {
            for (unsigned int i = 0; i < n; ++i) gnutls_x509_crt_deinit(c[i]);
            gnutls_free(c);
        }
    } free_chain{chain, length};

    gnutls_datum_t dn{};
    if (gnutls_x509_crt_get_dn3(chain[0], &dn, 0) >= 0) {
        self->subject_.assign(reinterpret_cast<const char*>(dn.data), dn.size);
        gnutls_free(dn.data);
    }
    self->g_->pk = static_cast<gnutls_pk_algorithm_t>(gnutls_x509_crt_get_pk_algorithm(chain[0], nullptr));

    gnutls_pkcs7_t pkcs7 = nullptr;
    if (rc = gnutls_pkcs7_init(&pkcs7); rc < 0) return make_error("GnuTLS PKCS#7: " + message(rc));
    struct FreePkcs7 {
        gnutls_pkcs7_t p;
        ~FreePkcs7() { gnutls_pkcs7_deinit(p); }
    } free_pkcs7{pkcs7};
    for (unsigned int i = 0; i < length; ++i)
        if (rc = gnutls_pkcs7_set_crt(pkcs7, chain[i]); rc < 0) return make_error("GnuTLS PKCS#7: " + message(rc));
    gnutls_datum_t der{};
    if (rc = gnutls_pkcs7_export2(pkcs7, GNUTLS_X509_FMT_DER, &der); rc < 0)
        return make_error("the MCA certificate chain as PKCS#7: " + message(rc));
    self->pkcs7_base64_ = base64_lines(der.data, der.size);
    gnutls_free(der.data);

    gnutls_x509_privkey_t xkey = nullptr;
    if (rc = gnutls_certificate_get_x509_key(cred, 0, &xkey); rc < 0)
        return make_error("the MCA key " + key_name + ": " + message(rc));
    if (rc = gnutls_privkey_init(&self->g_->key); rc < 0) {
        gnutls_x509_privkey_deinit(xkey);
        return make_error("GnuTLS: " + message(rc));
    }
    if (rc = gnutls_privkey_import_x509(self->g_->key, xkey, GNUTLS_PRIVKEY_IMPORT_AUTO_RELEASE); rc < 0) {
        gnutls_x509_privkey_deinit(xkey);
        return make_error("the MCA key " + key_name + ": " + message(rc));
    }
    return std::shared_ptr<const McaIdentity>(std::move(self));
}

Result<std::string> McaIdentity::sign_base64(std::string_view data, std::string_view hash) const {
    gnutls_digest_algorithm_t dig = hash == "sha512"   ? GNUTLS_DIG_SHA512
                                    : hash == "sha384" ? GNUTLS_DIG_SHA384
                                    : hash == "sha256" ? GNUTLS_DIG_SHA256
                                                       : GNUTLS_DIG_UNKNOWN;
    if (dig == GNUTLS_DIG_UNKNOWN) return make_error("no MCA signature with hash '" + std::string(hash) + "'");
    const gnutls_sign_algorithm_t sign = gnutls_pk_to_sign(g_->pk, dig);
    if (sign == GNUTLS_SIGN_UNKNOWN)
        return make_error("the MCA key cannot sign with " + std::string(hash));
    gnutls_datum_t in{reinterpret_cast<unsigned char*>(const_cast<char*>(data.data())),
                      static_cast<unsigned int>(data.size())};
    gnutls_datum_t sig{};
    if (int rc = gnutls_privkey_sign_data2(g_->key, sign, 0, &in, &sig); rc < 0)
        return make_error("signing with the MCA key (" + std::string(hash) + "): " + message(rc));
    std::string out = base64_lines(sig.data, sig.size);
    gnutls_free(sig.data);
    return out;
}

}  // namespace espvpn::session
