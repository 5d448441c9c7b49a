// Login prompts as openconnect asks them: on a terminal, hidden fields are read
// from /dev/tty with echo off; otherwise every answer is one line of standard
// input (so "printf 'pass\n123456\n' | espvpn ..." answers a password and an
// OTP). --passwd-on-stdin: the first line of standard input is the password,
// whatever is asked first, and it answers the first hidden field; later prompts
// take the following lines, even with --non-inter, until standard input ends.
// --non-inter otherwise turns any needed prompt into an error naming it.
#pragma once

#include "src/session/login_prompter.h"

namespace espvpn::cli {

class TerminalPrompter : public session::LoginPrompter {
public:
    // no_password (--no-passwd): any hidden-field prompt is an error.
    TerminalPrompter(bool non_interactive, bool no_password, bool passwd_on_stdin = false)
        : non_interactive_(non_interactive), no_password_(no_password), passwd_on_stdin_(passwd_on_stdin) {}
    Result<std::string> ask_text(std::string_view prompt) override;
    Result<Secret> ask_secret(std::string_view prompt) override;
    void show(std::string_view message) override;

private:
    Status read_stdin_password();  // --passwd-on-stdin: the first line, once
    Result<Secret> read_answer(std::string_view prompt);  // --non-inter: a later line of stdin, or an error

    bool non_interactive_;
    bool no_password_;
    bool passwd_on_stdin_;
    bool stdin_password_read_ = false;
    bool stdin_password_used_ = false;
    Secret stdin_password_;
};

// One line of standard input (without the newline) as a Secret, read byte by
// byte so nothing after the line is consumed; an error at end of input.
Result<Secret> read_stdin_line(std::string_view what);
// The same from any descriptor (the prompt channel's answers).
Result<Secret> read_fd_line(int fd, std::string_view what);

}  // namespace espvpn::cli
