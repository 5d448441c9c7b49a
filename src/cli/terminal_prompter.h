// Login prompts as openconnect asks them: on a terminal, hidden fields are read
// from /dev/tty with echo off; otherwise every answer is one line of standard
// input (so "printf 'pass\n123456\n' | espvpn ..." answers a password and an
// OTP). --non-inter turns any needed prompt into an error.
#pragma once

#include "src/session/login_prompter.h"

namespace espvpn::cli {

class TerminalPrompter : public session::LoginPrompter {
public:
    // no_password (--no-passwd): any hidden-field prompt is an error.
    TerminalPrompter(bool non_interactive, bool no_password)
        : non_interactive_(non_interactive), no_password_(no_password) {}
    Result<std::string> ask_text(std::string_view prompt) override;
    Result<Secret> ask_secret(std::string_view prompt) override;
    void show(std::string_view message) override;

private:
    bool non_interactive_;
    bool no_password_;
};

// One line of standard input (without the newline) as a Secret, read byte by
// byte so nothing after the line is consumed; an error at end of input.
Result<Secret> read_stdin_line(std::string_view what);

}  // namespace espvpn::cli
