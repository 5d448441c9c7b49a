// A TLS client connection over TCP, on GnuTLS: connect with a timeout (every
// resolved address in turn), TLS 1.2/1.3 with SNI, verification against system
// CAs and/or a CA file with host name check, or openconnect-style --servercert
// fingerprints (src/io/server_pin.h), optional client certificate.
// Every operation is bounded by a timeout, so a stalled server is an error, and
// can be cut short from another thread through a cancel fd (TlsConnectControl).
#pragma once

#include <gnutls/gnutls.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "src/io/server_pin.h"

struct sockaddr;

namespace espvpn::io {

using Deadline = std::chrono::steady_clock::time_point;

struct ProxySettings;  // src/io/proxy_tunnel.h

struct TlsClientConfig {
    bool system_trust = true;            // the system CA store (openconnect: unless --no-system-trust)
    std::string ca_file;                 // extra trusted CAs, PEM (--cafile)
    std::vector<std::string> server_pins;  // --servercert values; when set, only a match is accepted
    std::string client_cert_file;        // --certificate: PEM, PKCS#12 (told apart by content) or a pkcs11: URI
    std::string client_key_file;         // --sslkey, PEM or a pkcs11: URI; empty: the key is in client_cert_file
    Secret key_password;                 // --key-password: for an encrypted PEM key, the PKCS#12 file or the token's PIN
    std::map<std::string, std::string> resolve;  // --resolve HOST:IP: connect to IP, verify as HOST
    std::string priority = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
    std::chrono::milliseconds connect_timeout{10000};  // per address tried
    std::chrono::milliseconds io_timeout{30000};       // handshake, each read and each write
    // --proxy: TCP goes to the proxy, which opens a tunnel to the server (null: direct).
    std::shared_ptr<const ProxySettings> proxy;
    int cert_expire_warning_days = 60;   // -e: warn when the client certificate expires sooner
};

// The PIN of a client key on a PKCS#11 token (--key-password or asked for), kept
// while the credentials live: GnuTLS asks again when it must log in to the token
// afresh (a key that wants the PIN for every signature, a reopened session).
struct TokenPin {
    Secret pin;
    bool asked = false;    // the token wanted a PIN and none was held
    bool refused = false;  // the token refused the PIN given
    std::string token_label;  // the label of the token that asked (GnuTLS gives it to the callback)
};

// GnuTLS's PIN callback (gnutls_pin_callback_t) over a TokenPin: the PIN on a first
// attempt only (a refused PIN is never given again: each try counts towards locking
// the token), nothing when none is held (then `asked` is set).
int token_pin_callback(void* token_pin, int attempt, const char* token_url, const char* token_label,
                       unsigned int flags, char* pin, std::size_t pin_max);

// Trust anchors, pins and the client certificate, loaded once and shared by every
// connection of a login.
class TlsCredentials {
public:
    static Result<std::shared_ptr<const TlsCredentials>> load(const TlsClientConfig& config);
    TlsCredentials(const TlsCredentials&) = delete;
    TlsCredentials& operator=(const TlsCredentials&) = delete;
    ~TlsCredentials();

    gnutls_certificate_credentials_t native() const { return cred_; }
    const TlsClientConfig& config() const { return config_; }
    // True when one of the --servercert fingerprints matches (any of them may).
    bool pin_matches(const ServerFingerprints& fp) const;
    // The distinguished name of the client certificate (RFC 4514 text), "" when
    // none is configured: named in errors when the server refuses it.
    const std::string& client_subject() const { return client_subject_; }

private:
    TlsCredentials() = default;
    gnutls_certificate_credentials_t cred_ = nullptr;
    TlsClientConfig config_;             // without the PKCS#12 password
    std::vector<ServerCertPin> pins_;
    std::string client_subject_;
    std::unique_ptr<TokenPin> token_pin_;  // at a fixed address: GnuTLS's PIN callback holds it
};

// True when the client certificate's key (PKCS#12 bundle, encrypted PEM key, or a
// key on a PKCS#11 token whose URI carries no PIN) cannot be opened without a
// password or PIN and none is given: the caller may ask for one, as openconnect does.
// For a token no login is tried (no PIN try is spent).
bool client_key_needs_password(const TlsClientConfig& config);

// What opening the client key wants: nothing, a pass phrase (a file) or a token's PIN,
// with the token's label (what the user knows the token by). As client_key_needs_password.
struct KeyPasswordNeed {
    bool needed = false;
    bool token = false;
    std::string token_label;
};
KeyPasswordNeed client_key_password_need(const TlsClientConfig& config);

// The key of the client certificate: --sslkey, else the certificate's file or URI (a
// token URI's type=cert read as type=private).
std::string client_key_name(const TlsClientConfig& config);

// A private key on a token named by a pkcs11: URI without its PIN: whether the token
// asks for the PIN to reach it, and the token's label. No login is tried.
KeyPasswordNeed token_key_pin_need(const std::string& key_uri);

// A key GnuTLS as built here cannot open, told apart before the load so that the user
// reads what to give instead: a TPM2 key file (-----BEGIN TSS2 PRIVATE KEY-----, what
// openconnect loads through its own tpm2 code), a TPM 1.2 key blob or tpmkey: URL
// (Debian 12's GnuTLS 3.7.9 is built without TPM support: `gnutls-cli --list-config`
// lists no tpm/tpm2 hardware feature). An error naming the key; ok for anything else.
Status check_key_not_tpm_file(const std::string& key);

// One login to the token of `key_uri` with `pin` (one PIN try, as each load makes):
// true when the token took it, false when it refused it, an error when the key
// cannot be reached at all.
Result<bool> token_accepts_pin(const std::string& key_uri, const Secret& pin);

// GnuTLS's one-line description of a (D)TLS session: "(TLS1.3)-(ECDHE-X25519)-...".
std::string tls_session_description(gnutls_session_t session);

// Where a connection goes and how another thread stops it.
struct TlsConnectControl {
    // A numeric address to connect to instead of resolving the host (e.g. the
    // address of the session's first connection); the host is still verified.
    std::string address;
    // Readable = give up now (e.g. a CancelEvent); polled beside the socket by the
    // TCP connect, the handshake and every read/write until set_cancel_fd(-1).
    int cancel_fd = -1;
};

class TlsStream {
public:
    static Result<std::unique_ptr<TlsStream>> connect(const std::string& host, std::uint16_t port,
                                                      std::shared_ptr<const TlsCredentials> credentials,
                                                      const TlsConnectControl& control = {});
    TlsStream(const TlsStream&) = delete;
    TlsStream& operator=(const TlsStream&) = delete;
    ~TlsStream();

    // Writes everything or fails (timeout, reset). The deadline, if given,
    // shortens the configured I/O timeout.
    Status write_all(std::span<const std::uint8_t> bytes, std::optional<Deadline> deadline = {});
    // Some bytes, or 0 when the server closed the connection.
    Result<std::size_t> read_some(std::span<std::uint8_t> buffer, std::optional<Deadline> deadline = {});
    // For an idle kept-alive connection: false if the server closed it (or sent
    // something unexpected). Never blocks.
    bool usable_when_idle();
    // Sends close_notify without waiting for the reply, and closes the socket.
    void close();

    // The last failure was the server going away (EOF, reset, broken pipe).
    bool peer_closed() const { return peer_closed_; }
    // The TCP peer is a proxy (--proxy), not the server.
    bool via_proxy() const { return via_proxy_; }
    const std::string& host() const { return host_; }
    std::uint16_t port() const { return port_; }
    std::string endpoint() const;
    // "pin-sha256:..." of the server's public key (for DTLS code and messages).
    const std::string& peer_pin() const { return peer_pin_; }
    const std::string& peer_cert_md5() const { return peer_cert_md5_; }  // hex, lower case
    // "TLS1.3 / ECDHE-... / AES-256-GCM" for logs.
    std::string description() const;
    // The GnuTLS session, e.g. for gnutls_prf / key export by the DTLS code.
    gnutls_session_t native() const { return session_; }
    int fd() const { return fd_; }
    // The fd that cancels waits from now on (-1: none), e.g. cleared once an attempt hands the stream over.
    void set_cancel_fd(int fd) { cancel_fd_ = fd; }

private:
    friend class TlsCredentials;  // installs verify_callback
    TlsStream() = default;
    static int verify_callback(gnutls_session_t session);
    int verify_peer();
    Status wait(bool for_write, Deadline deadline, const char* what);
    Status handshake(Deadline deadline);
    std::string client_certificate_hint() const;  // for a failed handshake; "" if none was asked for
    Deadline effective(std::optional<Deadline> deadline) const;

    std::shared_ptr<const TlsCredentials> credentials_;
    gnutls_session_t session_ = nullptr;
    int fd_ = -1;
    int cancel_fd_ = -1;
    std::string host_;
    std::uint16_t port_ = 0;
    std::string peer_pin_;
    std::string peer_cert_md5_;
    std::string verify_failure_;
    bool peer_closed_ = false;
    bool via_proxy_ = false;
};

// Connects a non-blocking TCP socket, trying every address the name resolves to;
// `cancel_fd` (if >= 0) readable ends the wait at once.
Result<int> tcp_connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                        int cancel_fd = -1);

// The message of an attempt ended through its cancel fd.
inline constexpr const char* kCancelledMessage = "connection attempt cancelled";

// One bounded, cancellable wait on a socket (every connect, TLS and proxy wait goes
// through it): until `fd` has one of `events`, `cancel_fd` (if >= 0) turns readable,
// or `deadline` passes. EINTR is retried; poll_failed leaves the reason in errno.
enum class FdWait { ready, cancelled, timed_out, poll_failed };
FdWait wait_fd(int fd, short events, int cancel_fd, Deadline deadline);

}  // namespace espvpn::io
