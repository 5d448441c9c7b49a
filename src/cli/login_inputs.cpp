#include "src/cli/login_inputs.h"

namespace espvpn::cli {

Result<LoginInputs> login_inputs(const ClientOptions& options, session::StateFiles& files) {
    LoginInputs in;
    for (const auto& text : options.form_entries) {
        auto e = session::parse_form_entry(text);
        if (!e) return e.error();
        in.form_entries.push_back(std::move(*e));
    }
    if (!options.token_mode.empty()) {
        auto mode = options.token_mode == "hotp" ? session::SoftTokenMode::hotp : session::SoftTokenMode::totp;
        auto token = session::make_soft_token(mode, options.token_secret, files);
        if (!token) return token.error();
        in.token = std::move(*token);
    }
    return in;
}

}  // namespace espvpn::cli
