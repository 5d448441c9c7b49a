// The second ("user") certificate of Cisco multiple-certificate authentication
// (--mca-certificate, --mca-key, --mca-key-password): loaded once with GnuTLS from
// PEM or DER files (the key PKCS#1, SEC1 or PKCS#8, encrypted or not) or from a PKCS#11
// token (pkcs11: URIs; --mca-key-password is then the PIN), it gives the
// certificate chain as PKCS#7 and signs the server's request with its key, as
// openconnect 9 does (RSA PKCS#1 v1.5 or ECDSA over the hash the server lets us pick).
#pragma once

#include <gnutls/x509.h>

#include <memory>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::session {

class McaIdentity {
public:
    // key_file empty: the key is in cert_file too. Errors name the file and what was wrong
    // (unreadable, no certificate, wrong password, key not matching the certificate).
    static Result<std::shared_ptr<const McaIdentity>> load(const std::string& cert_file, const std::string& key_file,
                                                           const Secret& password);
    // The key a token holds for (cert_file, key_file): key_file, else the certificate's
    // URI with type=cert read as type=private; "" when the key is not on a token.
    static std::string token_key_uri(const std::string& cert_file, const std::string& key_file);
    ~McaIdentity();
    McaIdentity(const McaIdentity&) = delete;
    McaIdentity& operator=(const McaIdentity&) = delete;

    // The certificate (and any chain in the file) as DER PKCS#7, base64 in 64-column lines.
    const std::string& pkcs7_base64() const { return pkcs7_base64_; }
    const std::string& subject() const { return subject_; }
    // The signature of `data` with `hash` ("sha256", "sha384", "sha512"), base64 in 64-column lines.
    Result<std::string> sign_base64(std::string_view data, std::string_view hash) const;

private:
    McaIdentity() = default;
    // A certificate or key named by a pkcs11: URI: the key stays on the token.
    static Result<std::shared_ptr<const McaIdentity>> load_token(const std::string& cert_file, const std::string& key_name,
                                                                 const Secret& password);
    // subject_, the key's algorithm and pkcs7_base64_ from the certificate chain.
    Status describe_chain(gnutls_x509_crt_t* chain, unsigned int length);
    struct Gnutls;
    std::unique_ptr<Gnutls> g_;
    std::string pkcs7_base64_;
    std::string subject_;
};

}  // namespace espvpn::session
