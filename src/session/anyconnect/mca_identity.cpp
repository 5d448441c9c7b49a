#include "src/session/anyconnect/mca_identity.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/pkcs7.h>
#include <gnutls/x509.h>
#include <nettle/base64.h>

#include <algorithm>
#include <iterator>

#include "protocols/base/pkcs11_uri.h"
#include "src/io/input_file.h"
#include "src/io/tls_stream.h"

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

bool is_pem(const Secret& bytes) {
    const auto b = bytes.reveal();
    const std::string_view head(reinterpret_cast<const char*>(b.data()), std::min<std::size_t>(b.size(), 4096));
    return head.find("-----BEGIN") != std::string_view::npos;
}

gnutls_datum_t datum_of(const Secret& s) {
    return {const_cast<unsigned char*>(s.reveal().data()), static_cast<unsigned>(s.reveal().size())};
}

std::string message(int rc) { return gnutls_strerror(rc); }

}  // namespace

struct McaIdentity::Gnutls {
    gnutls_privkey_t key = nullptr;
    gnutls_pk_algorithm_t pk = GNUTLS_PK_UNKNOWN;
    io::TokenPin token_pin;  // a key on a token: its PIN, for GnuTLS's callback while the key lives
    ~Gnutls() {
        if (key) gnutls_privkey_deinit(key);
    }
};

McaIdentity::~McaIdentity() = default;

std::string McaIdentity::token_key_uri(const std::string& cert_file, const std::string& key_file) {
    std::string key_uri = key_file.empty() ? cert_file : key_file;
    if (const auto at = key_uri.find("type=cert"); key_file.empty() && at != std::string::npos)
        key_uri.replace(at, 9, "type=private");
    return is_pkcs11_uri(key_uri) ? key_uri : std::string();
}

Result<std::shared_ptr<const McaIdentity>> McaIdentity::load(const std::string& cert_file, const std::string& key_file,
                                                             const Secret& password) {
    const std::string& key_path = key_file.empty() ? cert_file : key_file;
    if (auto st = io::check_key_not_tpm_file(key_path); !st) return make_error("MCA: " + st.error().message);
    if (is_pkcs11_uri(cert_file) || is_pkcs11_uri(key_path)) return load_token(cert_file, key_path, password);
    const std::string cert_name = printable_key_name(cert_file);
    const std::string key_name = printable_key_name(key_path);
    // Read here, given to GnuTLS from memory (a /dev/fd/N cannot be reopened: io::read_input_file).
    auto cert_bytes = io::read_input_file(cert_file);
    if (!cert_bytes) return make_error("cannot read the MCA certificate " + cert_name);
    auto key_bytes = io::read_input_file(key_path);
    if (!key_bytes) return make_error("cannot read the MCA key " + key_name);

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
    gnutls_datum_t c = datum_of(*cert_bytes), k = datum_of(*key_bytes);
    int rc = is_pem(*cert_bytes) ? gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, p, 0)
                                 : gnutls_certificate_set_x509_simple_pkcs12_mem(cred, &c, GNUTLS_X509_FMT_DER, p);
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

    if (auto st = self->describe_chain(chain, length); !st) return st.error();

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

Status McaIdentity::describe_chain(gnutls_x509_crt_t* chain, unsigned int length) {
    int rc = 0;
    gnutls_datum_t dn{};
    if (gnutls_x509_crt_get_dn3(chain[0], &dn, 0) >= 0) {
        subject_.assign(reinterpret_cast<const char*>(dn.data), dn.size);
        gnutls_free(dn.data);
    }
    g_->pk = static_cast<gnutls_pk_algorithm_t>(gnutls_x509_crt_get_pk_algorithm(chain[0], nullptr));

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
    pkcs7_base64_ = base64_lines(der.data, der.size);
    gnutls_free(der.data);

    return {};
}

// A certificate and key on a PKCS#11 token (or the certificate in a PEM file, the key on a
// token): the key stays on the token and signs there; --mca-key-password is its PIN, given
// once (see io::token_pin_callback).
Result<std::shared_ptr<const McaIdentity>> McaIdentity::load_token(const std::string& cert_file,
                                                                   const std::string& key_name_given,
                                                                   const Secret& password) {
    // No --mca-key: the certificate's URI names the key, with type=private for a type=cert.
    std::string key_uri = key_name_given;
    if (key_uri == cert_file) key_uri = token_key_uri(cert_file, "");
    if (key_uri.empty()) key_uri = key_name_given;
    const std::string cert_name = printable_key_name(cert_file);
    const std::string key_name = printable_key_name(key_uri);
    if (!is_pkcs11_uri(key_uri))
        return make_error("the MCA key " + key_name + ": with a certificate on a token, give the key's pkcs11: URI");
    std::shared_ptr<McaIdentity> self(new McaIdentity());
    self->g_ = std::make_unique<Gnutls>();
    self->g_->token_pin.pin = password.clone();
    gnutls_x509_crt_t crt = nullptr;
    if (int rc = gnutls_x509_crt_init(&crt); rc < 0) return make_error("GnuTLS: " + message(rc));
    struct FreeCrt {
        gnutls_x509_crt_t c;
        ~FreeCrt() { gnutls_x509_crt_deinit(c); }
    } free_crt{crt};
    int rc = 0;
    if (is_pkcs11_uri(cert_file)) {
        gnutls_x509_crt_set_pin_function(crt, &io::token_pin_callback, &self->g_->token_pin);
        rc = gnutls_x509_crt_import_url(crt, cert_file.c_str(), 0);
    } else {
        auto pem = io::read_input_file(cert_file);
        if (!pem) return make_error("cannot load the MCA certificate " + cert_name + ": " + pem.error().message);
        gnutls_datum_t d = datum_of(*pem);
        rc = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM);
    }
    if (rc < 0) return make_error("cannot load the MCA certificate " + cert_name + ": " + message(rc));
    if (rc = gnutls_privkey_init(&self->g_->key); rc < 0) return make_error("GnuTLS: " + message(rc));
    gnutls_privkey_set_pin_function(self->g_->key, &io::token_pin_callback, &self->g_->token_pin);
    rc = gnutls_privkey_import_url(self->g_->key, key_uri.c_str(), 0);
    if (rc < 0) {
        if (self->g_->token_pin.asked)
            return make_error("the MCA key " + key_name + ": the token asks for its PIN and none was given "
                              "(--mca-key-password, or pin-value in the URI)");
        if (self->g_->token_pin.refused || rc == GNUTLS_E_PKCS11_PIN_ERROR)
            return make_error("the MCA key " + key_name + ": the token refused the PIN (one try made, not repeated "
                              "so as not to lock the token): " + message(rc));
        return make_error("the MCA key " + key_name + ": " + message(rc));
    }
    // The key must be the certificate's (GnuTLS checks that for files, not here).
    gnutls_pubkey_t from_cert = nullptr, from_key = nullptr;
    unsigned char id_cert[64], id_key[64];
    std::size_t n_cert = sizeof id_cert, n_key = sizeof id_key;
    bool same = gnutls_pubkey_init(&from_cert) >= 0 && gnutls_pubkey_init(&from_key) >= 0 &&
                gnutls_pubkey_import_x509(from_cert, crt, 0) >= 0 &&
                gnutls_pubkey_import_privkey(from_key, self->g_->key, 0, 0) >= 0 &&
                gnutls_pubkey_get_key_id(from_cert, GNUTLS_KEYID_USE_SHA256, id_cert, &n_cert) >= 0 &&
                gnutls_pubkey_get_key_id(from_key, GNUTLS_KEYID_USE_SHA256, id_key, &n_key) >= 0 && n_cert == n_key &&
                std::equal(id_cert, id_cert + n_cert, id_key);
    if (from_cert) gnutls_pubkey_deinit(from_cert);
    if (from_key) gnutls_pubkey_deinit(from_key);
    if (!same)
        return make_error("cannot load the MCA certificate " + cert_name + " with key " + key_name +
                          ": the key does not match the certificate");
    if (auto st = self->describe_chain(&crt, 1); !st) return st.error();
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
