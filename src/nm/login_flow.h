// The login window's decisions, without GTK (src/nm/login_window.cpp draws them):
// which of espvpn's prompt records (espvpn --prompt-fd, protocols/prompt/) the
// profile's stored password answers, what a failed run says, and which secrets go
// back to NetworkManager. Unit-tested (tests/unit/src/nm/test_login_flow.cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "protocols/prompt/prompt_channel.h"
#include "crypto/secret.h"
#include "src/nm/espvpn_command.h"

namespace espvpn::nm {

class LoginFlow {
public:
    // reprompt (-r): the stored password was refused before; it answers nothing.
    LoginFlow(const VpnSettings& settings, bool reprompt);

    // A new `espvpn --authenticate` run starts.
    void start_run();
    // The stored password answers the first password prompt of the first run (as
    // --passwd-on-stdin would); nullptr: the window asks.
    const Secret* automatic_answer(const prompt::Record& record);
    // The user answered `record` with `value` (the first password of a run is kept,
    // to go back to NetworkManager if its flags say so).
    void answered(const prompt::Record& record, const Secret& value);
    // espvpn --authenticate succeeded with `output`: the secrets for NetworkManager
    // (cookie, gateway, gwcert, resolve) and the password the user typed when the
    // profile keeps it (password-flags without "not saved" / "not required").
    Result<std::map<std::string, Secret>> secrets(std::string_view output) const;

    int runs() const { return runs_; }

private:
    const Secret* stored_ = nullptr;
    unsigned password_flags_ = 0;
    int runs_ = 0;
    bool password_seen_ = false;
    Secret typed_password_;
};

// What a failed run says: its last "error: " line of stderr, without the prefix
// (else the last line); plain text, shown as such.
std::string failure_text(std::string_view stderr_text);

}  // namespace espvpn::nm
