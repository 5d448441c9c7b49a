#include "src/io/tls_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "protocols/base/pkcs11_uri.h"
#include "src/io/input_file.h"
#include "src/io/proxy_tunnel.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"

namespace espvpn::io {

namespace {

std::string gnutls_message(int code) { return gnutls_strerror(code); }

long long ms_left(Deadline deadline) {
    // Rounded up, so poll never wakes before the deadline has passed.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max<long long>(0, left.count());
}

bool is_ip_literal(const std::string& host) {
    unsigned char buf[sizeof(in6_addr)];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool looks_like_pem(std::span<const std::uint8_t> bytes) {
    const std::string_view head(reinterpret_cast<const char*>(bytes.data()), std::min<std::size_t>(bytes.size(), 4096));
    return head.find("-----BEGIN ") != std::string_view::npos;
}

bool looks_like_pem(const std::string& path) {
    auto bytes = read_input_file(path);
    return !bytes || looks_like_pem(bytes->reveal());  // unreadable: the loader reports it
}

gnutls_datum_t datum_of(const Secret& s) {
    return {const_cast<unsigned char*>(s.reveal().data()), static_cast<unsigned>(s.reveal().size())};
}

}  // namespace

// A token URI that names the certificate object (type=cert) names its key with
// type=private, as openconnect does.
std::string client_key_name(const TlsClientConfig& config) {
    if (!config.client_key_file.empty()) return config.client_key_file;
    std::string key = config.client_cert_file;
    if (is_pkcs11_uri(key))
        for (const char* type : {"type=cert", "type=Cert"})
            if (auto at = key.find(type); at != std::string::npos) key.replace(at, std::strlen(type), "type=private");
    return key;
}

// It gives the PIN it holds (--key-password, or what the user typed at the prompt) on
// a first attempt only: GnuTLS calls again with GNUTLS_PIN_WRONG after the token
// refused it, and answering again would burn the token's retry counter (a PIV card
// locks after 3, a TPM counts dictionary-attack tries), so each load makes one
// C_Login at most. Without a PIN it answers nothing and notes that one was asked.
int token_pin_callback(void* userdata, int attempt, const char* /*token_url*/, const char* token_label,
                       unsigned int flags, char* pin, std::size_t pin_max) {
    auto* state = static_cast<TokenPin*>(userdata);
    if (token_label) state->token_label = token_label;
    if (attempt > 0 || (flags & GNUTLS_PIN_WRONG)) {
        state->refused = true;
        return GNUTLS_E_PKCS11_PIN_ERROR;
    }
    if (state->pin.empty()) {
        state->asked = true;
        return GNUTLS_E_PKCS11_PIN_ERROR;
    }
    const auto text = state->pin.reveal();
    if (text.size() + 1 > pin_max) return GNUTLS_E_PKCS11_PIN_ERROR;
    std::copy(text.begin(), text.end(), pin);
    pin[text.size()] = '\0';
    return 0;
}

namespace {

// --certificate may name a PEM file (key in it or in --sslkey), a PKCS#12 bundle
// (told apart by content), as in openconnect, or a PKCS#11 URI (GnuTLS reaches the
// token through p11-kit's modules: smart cards, SoftHSM2, tpm2-pkcs11); --key-password
// opens the file or is the token's PIN. GnuTLS's return code.
int load_client_certificate_file(gnutls_certificate_credentials_t cred, const TlsClientConfig& config,
                                 const char* pass) {
    const auto& cert = config.client_cert_file;
    const std::string key = client_key_name(config);
    if (is_pkcs11_uri(cert) || is_pkcs11_uri(key))
        return gnutls_certificate_set_x509_key_file2(cred, cert.c_str(), key.c_str(), GNUTLS_X509_FMT_PEM, pass, 0);
    // Files are read here and given to GnuTLS from memory (a /dev/fd/N of the privilege
    // split cannot be reopened by path: read_input_file).
    auto cert_bytes = read_input_file(cert);
    if (!cert_bytes) return GNUTLS_E_FILE_ERROR;
    gnutls_datum_t c = datum_of(*cert_bytes);
    if (!looks_like_pem(cert_bytes->reveal()))
        return gnutls_certificate_set_x509_simple_pkcs12_mem(cred, &c, GNUTLS_X509_FMT_DER, pass);
    if (key == cert) return gnutls_certificate_set_x509_key_mem2(cred, &c, &c, GNUTLS_X509_FMT_PEM, pass, 0);
    auto key_bytes = read_input_file(key);
    if (!key_bytes) return GNUTLS_E_FILE_ERROR;
    gnutls_datum_t k = datum_of(*key_bytes);
    return gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, pass, 0);
}

Status load_client_certificate(gnutls_certificate_credentials_t cred, const TlsClientConfig& config,
                               TokenPin& token_pin) {
    // GnuTLS wants a NUL-terminated password; keep that copy in a Secret too.
    Secret password(config.key_password.size() + 1);
    std::copy(config.key_password.reveal().begin(), config.key_password.reveal().end(),
              password.reveal_mutable().begin());
    const char* pass = config.key_password.empty() ? nullptr : reinterpret_cast<const char*>(password.reveal().data());
    const auto& cert = config.client_cert_file;
    const std::string key = client_key_name(config);
    const bool token = is_pkcs11_uri(cert) || is_pkcs11_uri(key);
    if (auto st = check_key_not_tpm_file(key); !st) return make_error("client certificate: " + st.error().message);
    if (token) {
        token_pin.pin = config.key_password.clone();
        gnutls_certificate_set_pin_function(cred, &token_pin_callback, &token_pin);
    }
    int rc = load_client_certificate_file(cred, config, pass);
    if (rc >= 0) return {};
    const std::string cert_name = printable_key_name(cert);
    const std::string key_name = printable_key_name(key);
    if (token && token_pin.asked)
        return make_error("client certificate " + cert_name + ": the token asks for its PIN and none was given "
                          "(-p/--key-password, or pin-value in the URI)");
    if (token && (token_pin.refused || rc == GNUTLS_E_PKCS11_PIN_ERROR))
        return make_error("client certificate " + cert_name + ": the token refused the PIN (one try made, "
                          "not repeated so as not to lock the token): " + gnutls_message(rc));
    if (!looks_like_pem(cert) && !token)
        return make_error("cannot load client certificate " + cert_name + " (PKCS#12" +
                          (pass ? "; wrong password?" : ", no password given: -p/--key-password") +
                          "): " + gnutls_message(rc));
    return make_error("cannot load client certificate " + cert_name + " with key " + key_name + ": " +
                      gnutls_message(rc));
}

// The subject of the loaded client certificate ("" if GnuTLS cannot say), with
// openconnect's -e/--cert-expire-warning: a warning when it has expired or expires
// within that many days.
std::string inspect_client_certificate(gnutls_certificate_credentials_t cred, const TlsClientConfig& config) {
    gnutls_x509_crt_t* chain = nullptr;
    unsigned int length = 0;
    if (gnutls_certificate_get_x509_crt(cred, 0, &chain, &length) < 0) return {};
    std::string subject;
    gnutls_datum_t dn{};
    if (length > 0 && gnutls_x509_crt_get_dn3(chain[0], &dn, 0) >= 0) {
        subject.assign(reinterpret_cast<const char*>(dn.data), dn.size);
        gnutls_free(dn.data);
    }
    if (length > 0) {
        const time_t expires = gnutls_x509_crt_get_expiration_time(chain[0]);
        const time_t now = time(nullptr);
        char when[64] = "?";
        struct tm tm{};
        if (expires != static_cast<time_t>(-1) && gmtime_r(&expires, &tm))
            std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
        if (expires != static_cast<time_t>(-1) && expires < now)
            LOG_WARN << "client certificate " << printable_key_name(config.client_cert_file) << " expired at " << when;
        else if (expires != static_cast<time_t>(-1) &&
                 expires - now < static_cast<time_t>(config.cert_expire_warning_days) * 86400)
            LOG_WARN << "client certificate " << printable_key_name(config.client_cert_file) << " expires soon, at " << when;
    }
    for (unsigned int i = 0; i < length; ++i) gnutls_x509_crt_deinit(chain[i]);
    gnutls_free(chain);
    return subject;
}

}  // namespace

bool client_key_needs_password(const TlsClientConfig& config) { return client_key_password_need(config).needed; }

KeyPasswordNeed client_key_password_need(const TlsClientConfig& config) {
    KeyPasswordNeed need;
    if (config.client_cert_file.empty() || !config.key_password.empty()) return need;
    const std::string key = client_key_name(config);
    need.token = is_pkcs11_uri(config.client_cert_file) || is_pkcs11_uri(key);
    // A URI with its PIN (pin-value, pin-source) is not tried here: a wrong one would cost a try.
    if (need.token && (pkcs11_uri_has_pin(config.client_cert_file) || pkcs11_uri_has_pin(key))) return need;
    gnutls_certificate_credentials_t trial = nullptr;
    if (gnutls_certificate_allocate_credentials(&trial) < 0) return need;
    // For a token, the callback answers no PIN: no login is tried, only noted as needed.
    TokenPin no_pin;
    if (need.token) gnutls_certificate_set_pin_function(trial, &token_pin_callback, &no_pin);
    int rc = load_client_certificate_file(trial, config, nullptr);
    gnutls_certificate_free_credentials(trial);
    need.needed = need.token ? no_pin.asked : (rc == GNUTLS_E_DECRYPTION_FAILED || rc == GNUTLS_E_MAC_VERIFY_FAILED);
    need.token_label = std::move(no_pin.token_label);
    return need;
}

namespace {

// The key of `key_uri` imported with `state` answering the token's PIN request; GnuTLS's code.
int import_token_key(const std::string& key_uri, TokenPin& state) {
    gnutls_privkey_t key = nullptr;
    if (int rc = gnutls_privkey_init(&key); rc < 0) return rc;
    gnutls_privkey_set_pin_function(key, &token_pin_callback, &state);
    const int rc = gnutls_privkey_import_url(key, key_uri.c_str(), 0);
    gnutls_privkey_deinit(key);
    return rc;
}

}  // namespace

Status check_key_not_tpm_file(const std::string& key) {
    std::string what;
    if (key.starts_with("tpmkey:")) {
        what = "TPM 1.2 keys (tpmkey:) are not supported";
    } else if (!is_pkcs11_uri(key)) {
        std::FILE* f = std::fopen(key.c_str(), "rb");
        if (!f) return {};  // the loader reports a missing file
        char head[8192];
        const std::size_t n = std::fread(head, 1, sizeof head, f);
        std::fclose(f);
        const std::string_view text(head, n);
        if (text.find("-----BEGIN TSS2 PRIVATE KEY-----") != std::string_view::npos)
            what = "TSS2 key files are not supported";
        else if (text.find("-----BEGIN TSS KEY BLOB-----") != std::string_view::npos)
            what = "TPM 1.2 key blobs are not supported";
    }
    if (what.empty()) return {};
    return make_error("the key " + printable_key_name(key) + ": " + what +
                      " (GnuTLS here has no TPM support); use a tpm2-pkcs11 URI (pkcs11:token=...;object=...) "
                      "for a key in the TPM");
}

KeyPasswordNeed token_key_pin_need(const std::string& key_uri) {
    KeyPasswordNeed need;
    need.token = is_pkcs11_uri(key_uri);
    if (!need.token || pkcs11_uri_has_pin(key_uri)) return need;
    TokenPin no_pin;
    (void)import_token_key(key_uri, no_pin);
    need.needed = no_pin.asked;
    need.token_label = std::move(no_pin.token_label);
    return need;
}

Result<bool> token_accepts_pin(const std::string& key_uri, const Secret& pin) {
    TokenPin state;
    state.pin = pin.clone();
    const int rc = import_token_key(key_uri, state);
    if (rc >= 0) return true;
    if (state.refused || rc == GNUTLS_E_PKCS11_PIN_ERROR) return false;
    return make_error("the key " + printable_key_name(key_uri) + ": " + gnutls_message(rc));
}

TlsCredentials::~TlsCredentials() {
    if (cred_) gnutls_certificate_free_credentials(cred_);
}

Result<std::shared_ptr<const TlsCredentials>> TlsCredentials::load(const TlsClientConfig& config) {
    std::shared_ptr<TlsCredentials> self(new TlsCredentials());
    for (const auto& text : config.server_pins) {
        auto pin = parse_server_cert_pin(text);
        if (!pin) return pin.error();
        self->pins_.push_back(std::move(*pin));
    }
    if (int rc = gnutls_certificate_allocate_credentials(&self->cred_); rc < 0)
        return make_error("TLS: cannot allocate credentials: " + gnutls_message(rc));
    if (config.system_trust) {
        int rc = gnutls_certificate_set_x509_system_trust(self->cred_);
        if (rc < 0) {
            LOG_WARN << "cannot load the system CA certificates: " << gnutls_message(rc);
        } else {
            LOG_DEBUG << "loaded " << rc << " system CA certificates";
        }
    }
    if (!config.ca_file.empty()) {
        auto ca = read_input_file(config.ca_file);
        if (!ca) return make_error("cannot load CA file: " + ca.error().message);
        gnutls_datum_t d = datum_of(*ca);
        int rc = gnutls_certificate_set_x509_trust_mem(self->cred_, &d, GNUTLS_X509_FMT_PEM);
        if (rc < 0) return make_error("cannot load CA file " + config.ca_file + ": " + gnutls_message(rc));
        if (rc == 0) return make_error("CA file " + config.ca_file + " holds no certificate");
    }
    if (!config.client_cert_file.empty()) {
        self->token_pin_ = std::make_unique<TokenPin>();
        if (auto st = load_client_certificate(self->cred_, config, *self->token_pin_); !st) return st.error();
        self->client_subject_ = inspect_client_certificate(self->cred_, config);
    }
    gnutls_certificate_set_verify_function(self->cred_, &TlsStream::verify_callback);
    self->config_ = TlsClientConfig{config.system_trust,    config.ca_file,         config.server_pins,
                                    config.client_cert_file, config.client_key_file, Secret(),
                                    config.resolve,          config.priority,        config.connect_timeout,
                                    config.io_timeout,       config.proxy,           config.cert_expire_warning_days};
    return std::shared_ptr<const TlsCredentials>(std::move(self));
}

FdWait wait_fd(int fd, short events, int cancel_fd, Deadline deadline) {
    pollfd p[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    while (true) {
        int n = poll(p, 2, static_cast<int>(ms_left(deadline)));
        if (n > 0 && (p[1].revents & POLLIN)) return FdWait::cancelled;
        if (n > 0) return FdWait::ready;
        if (n == 0) return FdWait::timed_out;
        if (errno != EINTR) return FdWait::poll_failed;
    }
}

bool TlsCredentials::pin_matches(const ServerFingerprints& fp) const {
    return std::any_of(pins_.begin(), pins_.end(), [&](const ServerCertPin& p) { return p.matches(fp); });
}

Result<int> tcp_connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                        int cancel_fd) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* list = nullptr;
    std::string service = std::to_string(port);
    if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list); rc != 0)
        return make_error("cannot resolve " + host + ": " + gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(list, &freeaddrinfo);

    std::string failures;
    for (auto* ai = list; ai; ai = ai->ai_next) {
        std::string where = endpoint_text(numeric_host(ai->ai_addr), port);
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            failures += "; " + where + ": " + std::strerror(errno);
            continue;
        }
        int err = 0;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            err = errno;
            if (err == EINPROGRESS) {
                const FdWait w = wait_fd(fd, POLLOUT, cancel_fd, std::chrono::steady_clock::now() + timeout);
                if (w == FdWait::cancelled) {
                    ::close(fd);
                    return make_error(std::string(kCancelledMessage) + " (connecting to " + where + ")");
                }
                socklen_t len = sizeof err;
                if (w == FdWait::timed_out) err = ETIMEDOUT;
                else if (w == FdWait::poll_failed) err = errno;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
            }
        }
        if (err == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            LOG_DEBUG << "TCP connected to " << host << " at " << where;
            return fd;
        }
        ::close(fd);
        failures += "; " + where + ": " +
                    (err == ETIMEDOUT ? "no answer within " + std::to_string(timeout.count()) + " ms"
                                      : std::string(std::strerror(err)));
    }
    return make_error("cannot connect to " + host + " port " + service + failures);
}

Result<std::unique_ptr<TlsStream>> TlsStream::connect(const std::string& host, std::uint16_t port,
                                                      std::shared_ptr<const TlsCredentials> credentials,
                                                      const TlsConnectControl& control) {
    const auto& config = credentials->config();
    auto override_ip = config.resolve.find(host);
    const ProxySettings* proxy = config.proxy.get();
    if (proxy && proxy::bypasses_proxy(host, proxy->no_proxy)) {
        LOG_DEBUG << host << " matches no_proxy: connecting directly";
        proxy = nullptr;
    }
    Result<int> fd = make_error("");
    if (proxy) {
        // The proxy reaches the server: by its --resolve address, else by name (never by the
        // address of an earlier connection: that was the proxy's).
        const std::string& target = override_ip != config.resolve.end() ? override_ip->second : host;
        LOG_DEBUG << "connecting to " << target << ":" << port << " through proxy " << proxy->spec.display();
        auto connect_proxy = [&] {
            return tcp_connect(proxy->spec.host, proxy->spec.port, config.connect_timeout, control.cancel_fd);
        };
        fd = connect_proxy();
        if (!fd) return make_error("proxy " + proxy->spec.display() + ": " + fd.error().message);
        if (auto st = open_proxy_tunnel(*fd, *proxy, target, port, config.io_timeout, control.cancel_fd, connect_proxy);
            !st) {
            ::close(*fd);
            return st.error();
        }
    } else {
        const std::string& address = !control.address.empty()             ? control.address
                                     : override_ip != config.resolve.end() ? override_ip->second
                                                                           : host;
        fd = tcp_connect(address, port, config.connect_timeout, control.cancel_fd);
        if (!fd) return fd.error();
    }

    std::unique_ptr<TlsStream> self(new TlsStream());
    self->via_proxy_ = proxy != nullptr;
    self->fd_ = *fd;
    self->cancel_fd_ = control.cancel_fd;
    self->host_ = host;
    self->port_ = port;
    self->credentials_ = std::move(credentials);
    int rc = gnutls_init(&self->session_, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
    if (rc < 0) return make_error("TLS: cannot create a session: " + gnutls_message(rc));
    gnutls_session_set_ptr(self->session_, self.get());
    const char* bad = nullptr;
    if (rc = gnutls_priority_set_direct(self->session_, config.priority.c_str(), &bad); rc < 0)
        return make_error("TLS priority string \"" + config.priority + "\" is invalid near \"" +
                          std::string(bad ? bad : "") + "\": " + gnutls_message(rc));
    if (rc = gnutls_credentials_set(self->session_, GNUTLS_CRD_CERTIFICATE, self->credentials_->native()); rc < 0)
        return make_error("TLS: cannot set credentials: " + gnutls_message(rc));
    if (!is_ip_literal(host)) {  // RFC 6066: no SNI for address literals
        if (rc = gnutls_server_name_set(self->session_, GNUTLS_NAME_DNS, host.data(), host.size()); rc < 0)
            return make_error("TLS: cannot set server name " + host + ": " + gnutls_message(rc));
    }
    gnutls_transport_set_int(self->session_, self->fd_);
    if (auto st = self->handshake(self->effective({})); !st) return st.error();
    LOG_DEBUG << "TLS handshake with " << self->endpoint() << " done: " << self->description();
    return self;
}

TlsStream::~TlsStream() {
    if (session_) gnutls_deinit(session_);
    if (fd_ >= 0) ::close(fd_);
}

std::string TlsStream::endpoint() const { return endpoint_text(host_, port_); }

std::string tls_session_description(gnutls_session_t session) {
    char* text = gnutls_session_get_desc(session);
    std::string out = text ? text : "";
    gnutls_free(text);
    return out;
}

std::string TlsStream::description() const { return tls_session_description(session_); }

Deadline TlsStream::effective(std::optional<Deadline> deadline) const {
    Deadline d = std::chrono::steady_clock::now() + credentials_->config().io_timeout;
    return deadline ? std::min(d, *deadline) : d;
}

Status TlsStream::wait(bool for_write, Deadline deadline, const char* what) {
    switch (wait_fd(fd_, for_write ? POLLOUT : POLLIN, cancel_fd_, deadline)) {
        case FdWait::ready: return {};
        case FdWait::cancelled:
            return make_error(std::string(kCancelledMessage) + " (" + what + " " + endpoint() + ")");
        case FdWait::timed_out:
            return make_error("timed out " + std::string(what) + " " + endpoint() + " (limit " +
                              std::to_string(credentials_->config().io_timeout.count()) + " ms)");
        case FdWait::poll_failed: break;
    }
    return make_error(std::string("poll failed: ") + std::strerror(errno));
}

Status TlsStream::handshake(Deadline deadline) {
    while (true) {
        int rc = gnutls_handshake(session_);
        if (rc == GNUTLS_E_SUCCESS) return {};
        if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
            if (auto st = wait(gnutls_record_get_direction(session_) == 1, deadline, "in the TLS handshake with");
                !st)
                return st;
            continue;
        }
        if (!verify_failure_.empty()) return make_error(verify_failure_);
        if (gnutls_error_is_fatal(rc)) {
            std::string msg = "TLS handshake with " + endpoint() + " failed: " + gnutls_message(rc);
            if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED)
                msg += std::string(" (") + gnutls_alert_get_name(gnutls_alert_get(session_)) + ")";
            return make_error(msg + client_certificate_hint());
        }
    }
}

// A server that requires a client certificate just drops the handshake
// without a usable one; say so, since its error ("pull function") does not.
std::string TlsStream::client_certificate_hint() const {
    if (gnutls_certificate_client_get_request_status(session_) == 0) return {};
    const std::string& subject = credentials_->client_subject();
    if (credentials_->config().client_cert_file.empty())
        return " (the server asked for a client certificate and none is configured: -c/--certificate)";
    if (!gnutls_certificate_get_ours(session_))
        return " (the server asked for a client certificate; \"" + subject +
               "\" is not from a CA it names, so it was not sent)";
    return " (the server may have refused the client certificate \"" + subject + "\")";
}

int TlsStream::verify_callback(gnutls_session_t session) {
    auto* self = static_cast<TlsStream*>(gnutls_session_get_ptr(session));
    return self ? self->verify_peer() : -1;
}

int TlsStream::verify_peer() {
    unsigned count = 0;
    const gnutls_datum_t* certs = gnutls_certificate_get_peers(session_, &count);
    if (!certs || count == 0) {
        verify_failure_ = "server " + endpoint() + " sent no certificate";
        return -1;
    }
    auto fp = fingerprints_of(certs[0]);
    if (!fp) {
        verify_failure_ = fp.error().message;
        return -1;
    }
    peer_pin_ = fp->pin();
    peer_cert_md5_ = fp->cert_md5_hex;
    if (const auto& pins = credentials_->config().server_pins; !pins.empty()) {
        if (credentials_->pin_matches(*fp)) {
            LOG_DEBUG << "server certificate of " << endpoint() << " accepted by its --servercert fingerprint";
            return 0;
        }
        verify_failure_ = "none of the " + std::to_string(pins.size()) +
                          " --servercert fingerprint(s) matches the server certificate of " + endpoint() +
                          "; its fingerprints are " + fp->all_forms() + " (use --servercert " + peer_pin_ +
                          " only if you trust this server)";
        return -1;
    }
    unsigned status = 0;
    int rc = gnutls_certificate_verify_peers3(session_, host_.c_str(), &status);
    if (rc < 0) {
        verify_failure_ = "cannot verify the certificate of " + endpoint() + ": " + gnutls_message(rc);
        return -1;
    }
    if (status != 0) {
        gnutls_datum_t text{};
        std::string reason = "not trusted";
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) >= 0) {
            reason = std::string(reinterpret_cast<char*>(text.data), text.size);
            gnutls_free(text.data);
            while (!reason.empty() && (reason.back() == ' ' || reason.back() == '\0')) reason.pop_back();
        }
        verify_failure_ = "server certificate of " + endpoint() + " (for host name " + host_ +
                          ") failed verification: " + reason + " To trust this server anyway, use --servercert " +
                          peer_pin_;
        return -1;
    }
    return 0;
}

Status TlsStream::write_all(std::span<const std::uint8_t> bytes, std::optional<Deadline> deadline) {
    if (!session_ || fd_ < 0) return make_error("write to a closed TLS connection");
    const Deadline until = effective(deadline);
    std::size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n = gnutls_record_send(session_, bytes.data() + off, bytes.size() - off);
        if (n > 0) {
            off += static_cast<std::size_t>(n);
            continue;
        }
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            // GnuTLS wants the same call repeated with the same data.
            if (auto st = wait(true, until, "sending to"); !st) return st;
            continue;
        }
        if (n == GNUTLS_E_PUSH_ERROR || n == GNUTLS_E_PREMATURE_TERMINATION) peer_closed_ = true;
        return make_error("sending to " + endpoint() + " failed: " + gnutls_message(static_cast<int>(n)) +
                          (peer_closed_ ? " (connection closed by the server)" : ""));
    }
    return {};
}

Result<std::size_t> TlsStream::read_some(std::span<std::uint8_t> buffer, std::optional<Deadline> deadline) {
    if (!session_ || fd_ < 0) return make_error("read from a closed TLS connection");
    const Deadline until = effective(deadline);
    while (true) {
        ssize_t n = gnutls_record_recv(session_, buffer.data(), buffer.size());
        if (n > 0) return static_cast<std::size_t>(n);
        if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
            peer_closed_ = true;
            return std::size_t{0};
        }
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            if (auto st = wait(false, until, "waiting for data from"); !st) return st.error();
            continue;
        }
        if (n == GNUTLS_E_REHANDSHAKE) continue;  // refused implicitly: we keep reading
        if (n == GNUTLS_E_PULL_ERROR) peer_closed_ = true;
        std::string msg = "receiving from " + endpoint() + " failed: " + gnutls_message(static_cast<int>(n));
        if (n == GNUTLS_E_FATAL_ALERT_RECEIVED)
            msg += std::string(" (") + gnutls_alert_get_name(gnutls_alert_get(session_)) + ")";
        return make_error(msg);
    }
}

bool TlsStream::usable_when_idle() {
    if (!session_ || fd_ < 0 || peer_closed_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 && gnutls_record_check_pending(session_) == 0) return true;
    // Readable while idle: a TLS 1.3 session ticket (fine), close_notify/EOF or junk.
    unsigned char byte;
    ssize_t n = gnutls_record_recv(session_, &byte, 1);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) return true;
    if (n <= 0) peer_closed_ = true;
    return false;
}

void TlsStream::close() {
    if (session_ && fd_ >= 0 && !peer_closed_) gnutls_bye(session_, GNUTLS_SHUT_WR);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace espvpn::io
