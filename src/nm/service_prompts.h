// The service's side of espvpn's prompt channel (espvpn --prompt-fd, protocols/prompt/) for a
// password login NetworkManager started interactively (ConnectInteractive: an agent, nmcli
// --ask or a desktop's, can ask the user). Without I/O: the records espvpn sends in, what to
// do out. Unit-tested (tests/unit/src/nm/test_service_prompts.cpp).
//
// What answers what, as --passwd-on-stdin's lines did: the password answers the first
// password prompt; an otp=yes profile's code the next prompt; a list (a portal's gateways, a
// group list without `authgroup`) its first choice, the server's default; a banner is
// accepted. A prompt nothing answers (a challenge known only after the password, a second
// code round) goes to the user: SecretsRequired with a secret of its own (kChallengeSecret,
// then challenge2, challenge3, ...: a client shows a secret it already has as the prompt's
// initial text) and the server's label as hints (NetworkManager adds the message as
// x-vpn-message:); the agent's auth dialog turns them into a field its client asks (nmcli:
// "LABEL (vpn.secrets.challenge):"), and NewSecrets brings the answer back to the waiting
// espvpn. A round is asked only when the profile marks its secret "not saved"
// (challenge-flags=2, ...; the editor and the import write them): NetworkManager writes a
// secret without flags into the profile file. At most kMaxRounds rounds per login.
// After the server refused the answers (an `error` record), or asks the password's field
// again after a code (a GlobalProtect gateway falls back to its password form after a wrong
// code; ocserv's OTP form has the password's field name, so not before), the prompt is
// cancelled: the service's password retry (SecretsRequired "password", a new espvpn) takes
// over, as before.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/secret.h"
#include "protocols/prompt/prompt_channel.h"
#include "src/nm/espvpn_command.h"

namespace espvpn::nm {

// The vpn.secrets item the first prompt round asks (round N > 1: challengeN), and the hint
// carrying its label.
inline constexpr std::string_view kChallengeSecret = "challenge";
inline constexpr int kMaxRounds = 3;
std::string challenge_secret(int round);
// Whether a hint names a round's secret (challenge, challenge2, ...).
bool is_challenge_secret(std::string_view hint);
inline constexpr std::string_view kLabelHint = "x-espvpn-label:";

struct PromptStep {
    enum class Kind { none, answer, ask_user, cancel };
    Kind kind = Kind::none;
    Secret value;                    // answer: the value to send (encode_answer)
    std::string message;             // ask_user: what the client shows (server text, escaped);
                                     // cancel: why, when it is not a refusal (for the log)
    std::vector<std::string> hints;  // ask_user: {kChallengeSecret, kLabelHint + label}
};

class ServicePrompts {
public:
    explicit ServicePrompts(const VpnSettings& settings);

    PromptStep on_record(const prompt::Record& record);
    // NewSecrets while a prompt waits for the user: its answer, the round's item (cancel when
    // absent).
    PromptStep answer_from(const VpnSettings& settings);

    bool waiting_for_user() const { return waiting_; }
    // Whether `settings` answer the prompt that waits (the round's item is there).
    bool has_answer(const VpnSettings& settings) const;
    // A prompt was cancelled after the server refused the answers: a login failure.
    bool refused() const { return refused_; }

private:
    std::optional<Secret> password_, otp_;
    unsigned round_flags_[kMaxRounds] = {};
    std::string message_;
    std::string password_field_;  // FORM\tNAME the password answered
    bool error_ = false, waiting_ = false, refused_ = false, code_given_ = false;
    int rounds_ = 0;
};

}  // namespace espvpn::nm
