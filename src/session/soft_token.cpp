#include "src/session/soft_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "src/io/input_file.h"
#include "src/log/logger.h"

namespace espvpn::session {

namespace {

constexpr int kMaxTries = 2;  // then the user is asked (openconnect: avoids locking the account)

Result<Secret> read_token_file(const std::string& path) {
    // /dev/fd/N (the privilege split, NetworkManager's pipe) is read from the descriptor itself.
    auto text = io::read_input_file(path, 64 * 1024);
    if (!text) return make_error("--token-secret: " + text.error().message);
    return text;
}

// The counter written back: StateFiles replaces the file by rename, never through a symlink
// at its name or at the temporary name beside it, as the token file's owner with its mode
// (the directory may be writable by someone else, espvpn may be root).
Status write_token_file(StateFiles& files, const std::string& path, const Secret& text) {
    if (auto done = files.write(path, text.reveal_text(), io::Sync::yes, 0600); !done)
        return make_error("the HOTP counter was not written back: " + done.error().message);
    return {};
}

// The HOTP file, at the start and again before each code (another process may have used
// the token since).
Result<Secret> read_hotp_file(StateFiles& files, const std::string& path) {
    auto text = files.read(path);
    if (!text) return make_error("--token-secret: " + text.error().message);
    if (!*text) return make_error("--token-secret: cannot read " + path + ": no such file");
    return std::move((*text)->bytes);
}

class OathToken : public SoftToken {
public:
    OathToken(SoftTokenMode mode, OtpSecret secret, std::string file, StateFiles& files,
              std::function<std::int64_t()> now)
        : mode_(mode), secret_(std::move(secret)), file_(std::move(file)), files_(files), now_(std::move(now)) {}

    const char* kind() const { return mode_ == SoftTokenMode::totp ? "TOTP" : "HOTP"; }

    Result<Secret> next_code() override {
        if (tries_ >= kMaxTries)
            return make_error(std::string("the server refused ") + std::to_string(tries_) + " " + kind() +
                              " codes from the soft token");
        if (mode_ == SoftTokenMode::totp) {
            // A second try uses the next time step, in case the server's clock runs ahead.
            const std::int64_t t = now_() + 30 * tries_;
            ++tries_;
            LOG_INFO << "answering with a TOTP code from the soft token";
            return totp_code(secret_.key, secret_.hash, t);
        }
        if (!file_.empty()) {
            // Another process may have used the token since we started: take the file's counter.
            auto text = read_hotp_file(files_, file_);
            if (!text) return text.error();
            auto fresh = parse_otp_secret(text->reveal_text(), true);
            if (!fresh) return make_error("--token-secret @" + file_ + ": " + fresh.error().message);
            secret_ = std::move(*fresh);
        }
        Secret code = hotp_code(secret_.key, secret_.hash, secret_.counter);
        ++secret_.counter;
        ++tries_;
        if (!file_.empty()) {
            if (auto st = write_token_file(files_, file_, format_otp_secret(secret_)); !st) return st.error();
        }
        LOG_INFO << "answering with an HOTP code from the soft token (next counter " << secret_.counter << ")";
        return code;
    }

private:
    SoftTokenMode mode_;
    OtpSecret secret_;
    std::string file_;
    StateFiles& files_;
    std::function<std::int64_t()> now_;
    int tries_ = 0;
};

}  // namespace

Result<std::unique_ptr<SoftToken>> make_soft_token(SoftTokenMode mode, const Secret& secret_text, StateFiles& files,
                                                   std::function<std::int64_t()> now) {
    if (!now) now = [] { return static_cast<std::int64_t>(std::time(nullptr)); };
    std::string_view text = secret_text.reveal_text();
    std::string file;
    Secret from_file;
    if (!text.empty() && (text.front() == '@' || text.front() == '/')) {
        file = std::string(text.front() == '@' ? text.substr(1) : text);
        // An HOTP file is state (its counter is written back): read as it is rewritten. A TOTP
        // file is only an input, read as given (NetworkManager passes it as /dev/fd/N).
        auto content = mode == SoftTokenMode::hotp ? read_hotp_file(files, file) : read_token_file(file);
        if (!content) return content.error();
        from_file = std::move(*content);
        text = from_file.reveal_text();
    }
    if (text.empty()) return make_error("--token-mode needs --token-secret (the key, or @FILE)");
    auto secret = parse_otp_secret(text, mode == SoftTokenMode::hotp);
    if (!secret) return make_error("--token-secret: " + secret.error().message);
    std::unique_ptr<SoftToken> token = std::make_unique<OathToken>(
        mode, std::move(*secret), mode == SoftTokenMode::hotp ? file : std::string(), files, std::move(now));
    return token;
}

}  // namespace espvpn::session
