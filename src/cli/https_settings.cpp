#include "src/cli/https_settings.h"

#include <gnutls/gnutls.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "protocols/base/pkcs11_uri.h"
#include "protocols/proxy/proxy.h"
#include "src/io/proxy_tunnel.h"
#include "src/io/server_pin.h"
#include "src/log/logger.h"
#include "src/session/anyconnect/mca_identity.h"

namespace espvpn::cli {

namespace {

// openconnect's --key-password-from-fsid: the file system ID of the key's file system, "%lx".
Secret key_password_from_fsid(const ClientOptions& o) {
    const std::string& key = o.sslkey.empty() ? o.certificate : o.sslkey;
    struct statvfs st{};
    if (key.empty() || ::statvfs(key.c_str(), &st) != 0) return {};
    char text[32];
    std::snprintf(text, sizeof text, "%lx", static_cast<unsigned long>(st.f_fsid));
    Secret s = Secret::from_string(text);
    secure_zero(text, sizeof text);
    return s;
}

std::string getenv_any(std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (const char* v = std::getenv(n); v && *v) return v;
    return {};
}

}  // namespace

Status prepare_compat_options(ClientOptions& o) {
    for (const auto& note : o.no_op_notes) LOG_DEBUG << note;
    // A short pin is accepted (openconnect takes 4 characters), never silently: with a pin
    // the CA is not checked, so the pin is all that authenticates the server.
    for (const auto& text : o.servercert) {
        auto pin = io::parse_server_cert_pin(text);
        if (!pin) return pin.error();
        if (pin->bits() < io::kStrongPinBits)
            LOG_WARN << "WARNING: --servercert " << text << " pins only " << pin->bits()
                     << " bits of the server's fingerprint (fewer than " << io::kStrongPinBits
                     << "), and a pin replaces the CA check: a server can make a certificate that matches "
                        "it. Give the whole fingerprint (a mismatch error prints it).";
    }
    if (o.gnutls_debug > 0) {
        gnutls_global_set_log_function([](int level, const char* text) {
            std::string line = text ? text : "";
            while (!line.empty() && line.back() == '\n') line.pop_back();
            LOG_INFO << "gnutls[" << level << "]: " << line;
        });
        gnutls_global_set_log_level(o.gnutls_debug);
    }
    if (o.key_password_from_fsid && o.key_password.empty()) {
        if (o.certificate.empty()) return make_error("--key-password-from-fsid needs -c/--certificate (or -k/--sslkey)");
        if (key_password_from_fsid(o).empty())
            return make_error("--key-password-from-fsid: cannot read the file system ID of " +
                              printable_key_name(o.sslkey.empty() ? o.certificate : o.sslkey));
    }
    const std::string env_proxy = getenv_any({"https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"});
    if (o.libproxy) {
        // Our --libproxy reads the environment only (libproxy's "env" source): no PAC, no WPAD.
        if (env_proxy.empty()) {
            LOG_DEBUG << "--libproxy: no https_proxy/all_proxy in the environment: connecting directly";
        } else {
            auto spec = proxy::parse_proxy_url(env_proxy);
            if (!spec) return make_error("--libproxy: the environment's proxy: " + spec.error().message);
            o.proxy = Secret::from_string(env_proxy);
            o.proxy_bypass = getenv_any({"no_proxy", "NO_PROXY"});
            LOG_INFO << "using proxy " << spec->display() << " from the environment"
                     << (o.proxy_bypass.empty() ? "" : " (no_proxy: " + o.proxy_bypass + ")");
        }
    } else if (o.proxy.empty() && !env_proxy.empty()) {
        LOG_INFO << "https_proxy/all_proxy is set in the environment but not used (openconnect would use "
                    "https_proxy): pass --libproxy or --proxy to go through it, --no-proxy to silence this";
    }
    if (!o.proxy.empty()) {
        if (auto spec = proxy::parse_proxy_url(o.proxy.reveal_text()))
            LOG_DEBUG << "proxy " << spec->display() << (spec->user.empty() ? "" : " as user " + spec->user);
    }
    return {};
}

io::HttpsClientConfig https_config(const ClientOptions& o) {
    io::HttpsClientConfig h;
    h.tls.system_trust = !o.no_system_trust;
    h.tls.ca_file = o.cafile;
    h.tls.server_pins = o.servercert;
    h.tls.client_cert_file = o.certificate;
    h.tls.client_key_file = o.sslkey;
    h.tls.key_password = o.key_password.clone();
    for (const auto& r : o.resolve) {
        auto colon = r.find(':');
        h.tls.resolve[r.substr(0, colon)] = r.substr(colon + 1);
    }
    if (o.pfs) h.tls.priority += ":-RSA";  // TLS 1.2 RSA key exchange is the one without forward secrecy
    h.tls.cert_expire_warning_days = o.cert_expire_warning_days;
    if (o.key_password_from_fsid && o.key_password.empty()) h.tls.key_password = key_password_from_fsid(o);
    if (!o.proxy.empty()) {
        // Parsed once already by the option table; a failure here cannot happen.
        if (auto spec = proxy::parse_proxy_url(o.proxy.reveal_text())) {
            auto p = std::make_shared<io::ProxySettings>();
            p->spec = std::move(*spec);
            p->no_proxy = o.proxy_bypass;
            // Basic sends the password in clear: only when --proxy-auth asks for it, as openconnect.
            if (!o.proxy_auth.empty())
                if (auto m = proxy::parse_proxy_auth(o.proxy_auth)) p->auth = std::move(*m);
            h.tls.proxy = std::move(p);
        }
    }
    const std::chrono::milliseconds timeout{o.http_timeout_s * 1000L};
    h.tls.connect_timeout = std::min(timeout, h.tls.connect_timeout);
    h.tls.io_timeout = timeout;
    h.response_timeout = timeout;
    h.keep_alive = !o.no_http_keepalive;
    return h;
}

namespace {

// The token as the user knows it (its label, control characters shown as '?': it is
// the device's text) and the key's URI without its PIN.
std::string pin_prompt(const std::string& what, const io::KeyPasswordNeed& need, const std::string& key) {
    std::string label = need.token_label;
    for (char& c : label)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    if (label.empty()) return "Enter PIN for " + what + printable_key_name(key) + ":";
    return "Enter PIN for token '" + label + "' (" + what + printable_key_name(key) + "):";
}

// The PIN of a key on a token, asked as openconnect asks (echo off; standard input;
// an error with --non-inter). A window (--prompt-fd) shows a refused PIN as an error
// and asks again: each answer is one login to the token (one try of its counter),
// and the user decides whether to try again or cancel. A terminal gets one try: the
// load reports a refusal and espvpn exits 1.
Result<Secret> ask_token_pin(session::LoginPrompter& prompter, bool ask_again, const std::string& what,
                             const io::KeyPasswordNeed& need, const std::string& key_uri) {
    const std::string prompt = pin_prompt(what, need, key_uri);
    while (true) {
        auto pin = prompter.ask_pin(prompt);
        if (!pin || !ask_again) return pin;
        auto taken = io::token_accepts_pin(key_uri, *pin);
        if (!taken) return taken.error();
        if (*taken) return pin;
        const std::string token = need.token_label.empty() ? "the token" : "token '" + need.token_label + "'";
        prompter.form_message("Wrong PIN: " + token + " refused it (each try counts towards locking the token)",
                              true);
    }
}

}  // namespace

Status ask_key_password_if_needed(ClientOptions& o, session::LoginPrompter& prompter) {
    const auto tls = https_config(o).tls;
    const auto need = io::client_key_password_need(tls);
    if (!need.needed) return {};
    // As openconnect: a key on a token wants its PIN, a file its pass phrase; the answer is
    // read with echo off, from standard input with --passwd-on-stdin, refused with --non-inter.
    const std::string name = printable_key_name(o.certificate);
    auto pass = need.token ? ask_token_pin(prompter, o.prompt_fd >= 0, "", need, io::client_key_name(tls))
                           : prompter.ask_secret("Enter the pass phrase of " + name + ":");
    if (!pass)
        return make_error("client certificate " + name + " needs its " + (need.token ? "PIN" : "password") +
                          " (-p/--key-password): " + pass.error().message);
    o.key_password = std::move(*pass);
    return {};
}

Status ask_mca_pin_if_needed(ClientOptions& o, session::LoginPrompter& prompter) {
    if (o.protocol != Protocol::anyconnect || o.mca_certificate.empty() || !o.mca_key_password.empty()) return {};
    const std::string key_uri = session::McaIdentity::token_key_uri(o.mca_certificate, o.mca_key);
    if (key_uri.empty() || pkcs11_uri_has_pin(o.mca_certificate)) return {};
    const auto need = io::token_key_pin_need(key_uri);
    if (!need.needed) return {};
    auto pin = ask_token_pin(prompter, o.prompt_fd >= 0, "the MCA key ", need, key_uri);
    if (!pin)
        return make_error("the MCA key " + printable_key_name(key_uri) +
                          " needs its PIN (--mca-key-password): " + pin.error().message);
    o.mca_key_password = std::move(*pin);
    return {};
}

}  // namespace espvpn::cli
