#include "src/cli/tunnel_command.h"

#include <ostream>

#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/session_cookie.h"
#include "src/cli/exit_codes.h"
#include "src/cli/terminal_prompter.h"
#include "src/log/logger.h"
#include "src/session/anyconnect/login.h"
#include "src/session/anyconnect/tunnel.h"
#include "src/cli/sso_settings.h"

namespace espvpn::cli {

namespace {

std::string user_agent(const ClientOptions& o) {
    if (!o.useragent.empty()) return o.useragent;
    return std::string(anyconnect::kUserAgentPrefix) +
           (o.version_string.empty() ? std::string(anyconnect::kDefaultVersion) : o.version_string);
}


// AnyConnect in the command outline: the XML login (or a cookie), then the tunnel
// on the login's kept TLS connection.
class AcCommand final : public ProtocolCommand {
public:
    Status parse_target(const ClientOptions& options) override {
        auto url = http::parse_url(options.server);
        if (!url) return url.error();
        url_ = std::move(*url);
        if (!options.usergroup.empty()) url_.target = "/" + options.usergroup;
        return {};
    }
    std::optional<int> use_cookie(const ClientOptions& options, std::string_view text) override;
    std::optional<int> log_in(ClientOptions& options, io::HttpsClient& https, session::LoginPrompter& prompter,
                              const LoginInputs& inputs) override;
    http::Url server() const override { return auth_.server; }
    Secret cookie_text() const override { return anyconnect::cookie_text(auth_.webvpn); }
    int connect(ClientOptions& options, io::HttpsClient& https, ProcessControl& process,
                session::TunnelOptions& tunnel) override;

private:
    http::Url url_;
    session::AcAuthenticated auth_;
};

std::optional<int> AcCommand::use_cookie(const ClientOptions&, std::string_view text) {
    auto webvpn = anyconnect::webvpn_from_cookie_text(text);
    if (!webvpn) {
        LOG_ERROR << "the AnyConnect cookie is not usable: " << webvpn.error().message;
        return kExitError;
    }
    auth_.server = http::Url{url_.host, url_.port, "/"};
    auth_.webvpn = std::move(*webvpn);
    LOG_INFO << "using the given cookie for " << auth_.server.host;
    return std::nullopt;
}

std::optional<int> AcCommand::log_in(ClientOptions& options, io::HttpsClient& https, session::LoginPrompter& prompter,
                                    const LoginInputs& inputs) {
    session::AcLoginSettings settings;
    settings.server = url_;
    settings.user = options.user;
    settings.authgroup = options.authgroup;
    settings.user_agent = user_agent(options);
    if (!options.version_string.empty()) settings.client.version = options.version_string;
    settings.client.device_id = options.os;
    settings.dump_traffic = options.dump_http_traffic;
    settings.csd_wrapper = options.csd_wrapper;
    settings.csd_user = options.csd_user;
    if (!options.certificate.empty()) settings.client_certificate = https.credentials()->client_subject();
    settings.form_entries = inputs.form_entries;
    settings.token = inputs.token;
    // --sso-browser, --external-browser, or the external flow by default (src/cli/sso_settings.h).
    settings.sso_browser = sso_browser(options);
    if (!options.mca_certificate.empty())
        settings.mca = session::McaFiles{options.mca_certificate, options.mca_key, options.mca_key_password.clone()};
    session::AcLogin login(https, std::move(settings), prompter);
    auto done = login.run();
    https.log_summary("login");
    if (!done) {
        LOG_ERROR << "login failed: " << done.error().message;
        return kExitError;
    }
    auth_ = std::move(*done);
    return std::nullopt;
}

int AcCommand::connect(ClientOptions& options, io::HttpsClient& https, ProcessControl& process,
                       session::TunnelOptions& t) {
    t.user_agent = user_agent(options);
    t.dtls_ciphers = options.dtls_ciphers;
    t.dtls12_ciphers = options.dtls12_ciphers;
    // openconnect 9.01 keeps the interval for GlobalProtect's HIP and Juniper's TNCC; its
    // AnyConnect runs the CSD host scan once per login and never again: so does espvpn.
    if (options.force_trojan_s > 0)
        LOG_INFO << "--force-trojan: AnyConnect runs the CSD host scan once, at the login (as openconnect does); "
                    "there is nothing to repeat";
    if (!options.dry_run) process.background();  // -b: from here on, the daemon child
    auto end = session::run_ac_tunnel(https, auth_, t);
    if (!end) {
        LOG_ERROR << end.error().message;
        return kExitError;
    }
    if (*end == session::TunnelEnd::user_logout) LOG_INFO << session::describe(*end);
    return exit_code(*end, t.always_on);
}

}  // namespace

std::unique_ptr<ProtocolCommand> make_anyconnect_command() { return std::make_unique<AcCommand>(); }

}  // namespace espvpn::cli
