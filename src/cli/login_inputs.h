// What the command line answers in a login form, for both protocols:
// -F/--form-entry values and the --token-mode generator.
#pragma once

#include <memory>
#include <vector>

#include "protocols/base/result.h"
#include "src/cli/options.h"
#include "src/session/login_answers.h"
#include "src/session/soft_token.h"

namespace espvpn::cli {

struct LoginInputs {
    std::vector<session::FormEntry> form_entries;
    std::shared_ptr<session::SoftToken> token;  // null without --token-mode
};
// `files`: where the HOTP token's counter is re-read and written back (outlives the inputs).
Result<LoginInputs> login_inputs(const ClientOptions& options, session::StateFiles& files);

}  // namespace espvpn::cli
