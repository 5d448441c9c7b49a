#include "src/cli/https_settings.h"

#include <algorithm>

namespace espvpn::cli {

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
    const std::chrono::milliseconds timeout{o.http_timeout_s * 1000L};
    h.tls.connect_timeout = std::min(timeout, h.tls.connect_timeout);
    h.tls.io_timeout = timeout;
    h.response_timeout = timeout;
    h.keep_alive = !o.no_http_keepalive;
    return h;
}

Status ask_key_password_if_needed(ClientOptions& o, session::LoginPrompter& prompter) {
    if (!io::client_key_needs_password(https_config(o).tls)) return {};
    auto pass = prompter.ask_secret("Enter the pass phrase of " + o.certificate + ":");
    if (!pass)
        return make_error("client certificate " + o.certificate + " needs its password (-p/--key-password): " +
                          pass.error().message);
    o.key_password = std::move(*pass);
    return {};
}

}  // namespace espvpn::cli
