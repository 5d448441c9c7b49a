// Login prompts for a program: `espvpn --prompt-fd N` asks every prompt as a record
// on file descriptor N (a socket the program holds the other end of) and reads the
// answer line from it (protocols/prompt/prompt_channel.h). nm-espvpn-auth-dialog's
// login window drives espvpn --authenticate so.
#pragma once

#include "src/session/login_prompter.h"

namespace espvpn::prompt {
struct Record;
}

namespace espvpn::cli {

class ChannelPrompter : public session::LoginPrompter {
public:
    // no_password (--no-passwd): any hidden-field prompt is an error.
    ChannelPrompter(int fd, bool no_password) : fd_(fd), no_password_(no_password) {}
    Result<std::string> ask_text(std::string_view prompt) override;
    Result<Secret> ask_secret(std::string_view prompt) override;
    // Form "token", field "pin" (prompt::kTokenPinForm): a password field the program
    // answers only with what the user types.
    Result<Secret> ask_pin(std::string_view prompt) override;
    Result<std::string> ask_choice(std::string_view label, const std::vector<std::string>& choices) override;
    void show(std::string_view message) override;
    Result<Secret> ask_field(const session::LoginField& field) override;
    Result<std::string> ask_select(const session::LoginField& field) override;
    Status accept_banner(std::string_view text) override;
    void form_message(std::string_view text, bool error) override;
    bool offers_defaults() const override { return true; }

private:
    Result<Secret> ask(const prompt::Record& record);  // writes the record, reads the answer
    Status send(const prompt::Record& record);

    int fd_;
    bool no_password_;
};

// --prompt-fd N: an open descriptor, made close-on-exec (scripts and browsers never see it).
Status check_prompt_fd(int fd);

}  // namespace espvpn::cli
