#include "src/cli/terminal_prompter.h"

#include "protocols/base/ascii.h"

#include <fcntl.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace espvpn::cli {

namespace {

constexpr std::size_t kMaxLine = 64 * 1024;

// Reads up to '\n' from fd into a buffer that is zeroed after use.
Result<Secret> read_line(int fd, std::string_view what) {
    std::vector<std::uint8_t> buf;
    buf.reserve(256);
    bool got_any = false;
    for (;;) {
        std::uint8_t c;
        ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return make_error(std::string("cannot read ") + std::string(what) + ": " + std::strerror(errno));
        if (n == 0) {
            if (!got_any) return make_error("end of input while waiting for " + std::string(what));
            break;
        }
        got_any = true;
        if (c == '\n') break;
        if (buf.size() >= kMaxLine) {
            secure_zero(buf.data(), buf.size());
            return make_error(std::string(what) + ": line longer than 64 KiB");
        }
        // Reallocation would leave a copy behind: grow by hand, zeroing the old block.
        if (buf.size() == buf.capacity()) {
            std::vector<std::uint8_t> bigger;
            bigger.reserve(buf.capacity() * 2);
            bigger.assign(buf.begin(), buf.end());
            secure_zero(buf.data(), buf.size());
            buf.swap(bigger);
        }
        buf.push_back(c);
    }
    if (!buf.empty() && buf.back() == '\r') buf.pop_back();
    Secret line(std::span<const std::uint8_t>(buf.data(), buf.size()));
    secure_zero(buf.data(), buf.capacity());
    return line;
}

// While a secret is read with echo off: a signal that ends the process (a terminal's Ctrl-C)
// puts the terminal back first, then ends it as it would have.
int echo_tty = -1;
termios echo_saved{};
constexpr int kEndingSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

extern "C" void restore_echo_and_end(int signo) {
    if (echo_tty >= 0) {
        ::tcsetattr(echo_tty, TCSAFLUSH, &echo_saved);
        (void)!::write(echo_tty, "\n", 1);
    }
    ::signal(signo, SIG_DFL);
    ::raise(signo);  // delivered, with the default action, when this handler returns
}

class EchoOffGuard {
public:
    EchoOffGuard(int tty, const termios& saved) {
        echo_saved = saved;
        echo_tty = tty;
        struct sigaction act{};
        act.sa_handler = restore_echo_and_end;
        sigemptyset(&act.sa_mask);
        for (std::size_t i = 0; i < std::size(kEndingSignals); ++i) {
            struct sigaction old{};
            ::sigaction(kEndingSignals[i], nullptr, &old);
            old_[i] = old;
            // An ignored signal stays ignored (e.g. SIGHUP under nohup).
            if (old.sa_handler != SIG_IGN) ::sigaction(kEndingSignals[i], &act, nullptr);
        }
    }
    ~EchoOffGuard() {
        for (std::size_t i = 0; i < std::size(kEndingSignals); ++i) ::sigaction(kEndingSignals[i], &old_[i], nullptr);
        echo_tty = -1;
    }
    EchoOffGuard(const EchoOffGuard&) = delete;
    EchoOffGuard& operator=(const EchoOffGuard&) = delete;

private:
    struct sigaction old_[std::size(kEndingSignals)]{};
};

// `text` (the server's: control characters escaped) and `end` in one write (a prompt, a message).
void write_text(int fd, std::string_view text, std::string_view end) {
    std::string t = printable(text);
    t += end;
    (void)!::write(fd, t.data(), t.size());
}

}  // namespace

Result<Secret> read_stdin_line(std::string_view what) { return read_line(0, what); }

Result<Secret> read_fd_line(int fd, std::string_view what) { return read_line(fd, what); }

Status TerminalPrompter::read_stdin_password() {
    if (!passwd_on_stdin_ || stdin_password_read_) return {};
    stdin_password_read_ = true;
    auto line = read_line(0, "the password on standard input (--passwd-on-stdin)");
    if (!line) return line.error();
    stdin_password_ = std::move(*line);
    return {};
}

Result<Secret> TerminalPrompter::read_answer(std::string_view prompt) {
    const std::string refused = "user input required ('" + std::string(prompt) + "') but --non-inter was given";
    if (!passwd_on_stdin_) return make_error(refused);
    auto line = read_line(0, "'" + std::string(prompt) + "'");
    if (line) return line;
    return make_error(refused + " and standard input has no more lines");
}

Result<std::string> TerminalPrompter::ask_text(std::string_view prompt) {
    if (auto st = read_stdin_password(); !st) return st.error();
    if (!non_interactive_ && ::isatty(0)) write_text(2, prompt, " ");
    auto line = non_interactive_ ? read_answer(prompt) : read_line(0, "'" + std::string(prompt) + "'");
    if (!line) return line.error();
    return std::string(line->reveal_text());
}

Result<Secret> TerminalPrompter::ask_secret(std::string_view prompt) {
    if (no_password_) return make_error("the server asks for '" + std::string(prompt) + "' but --no-passwd was given");
    if (auto st = read_stdin_password(); !st) return st.error();
    if (passwd_on_stdin_ && !stdin_password_used_) {
        stdin_password_used_ = true;
        return std::move(stdin_password_);
    }
    if (non_interactive_) return read_answer(prompt);
    if (!::isatty(0)) return read_line(0, "'" + std::string(prompt) + "' on standard input");
    int tty = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (tty < 0) return read_line(0, "'" + std::string(prompt) + "'");
    // Echo off before the prompt shows (as getpass does): what the user types right after the
    // prompt is then neither echoed nor discarded by the switch's flush (TCSAFLUSH).
    termios saved{};
    const bool have_termios = ::tcgetattr(tty, &saved) == 0;
    std::optional<EchoOffGuard> guard;
    if (have_termios) {
        guard.emplace(tty, saved);
        termios quiet = saved;
        quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        ::tcsetattr(tty, TCSAFLUSH, &quiet);
    }
    write_text(tty, prompt, " ");
    auto line = read_line(tty, "'" + std::string(prompt) + "'");
    if (have_termios) ::tcsetattr(tty, TCSAFLUSH, &saved);
    guard.reset();
    (void)!::write(tty, "\n", 1);
    ::close(tty);
    return line;
}

void TerminalPrompter::show(std::string_view message) { write_text(2, message, "\n"); }

}  // namespace espvpn::cli
