#include "src/session/soft_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "src/io/input_file.h"
#include "src/io/owned_file.h"
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

// Replaces the file's content with `text` through a new file in the same directory, so
// a crash never leaves a half-written secret. The directory may be writable by someone
// else (the file is the user's, espvpn may be root): the token file itself is opened
// without following a symlink, the new file is created (never opened: a name planted
// there is refused) as the token file's owner with its mode, then renamed over it.
Status write_token_file(const std::string& path, const Secret& text) {
    io::UniqueFd cur(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!cur.valid()) {
        if (errno == ELOOP)
            return make_error("the HOTP token file " + path + " is a symlink: the next counter is not written "
                              "through it (give --token-secret @ the file itself)");
        return make_error("cannot write the HOTP token file " + path + ": " + std::strerror(errno));
    }
    struct stat st{};
    if (::fstat(cur.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return make_error("the HOTP token file " + path + " is not a regular file; the counter is not written back");
    cur.reset();
    io::FsIdentity owner(st.st_uid, st.st_gid);
    if (owner.failed())
        return make_error("cannot write the HOTP token file " + path + " as its owner (uid " +
                          std::to_string(st.st_uid) + ")");
    if (auto done = io::replace_file(path, text.reveal(), st.st_mode & 0777, ".espvpn-new"); !done)
        return make_error("the HOTP counter was not written back: " + done.error().message);
    return {};
}

class OathToken : public SoftToken {
public:
    OathToken(SoftTokenMode mode, OtpSecret secret, std::string file, std::function<std::int64_t()> now)
        : mode_(mode), secret_(std::move(secret)), file_(std::move(file)), now_(std::move(now)) {}

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
            auto text = read_token_file(file_);
            if (!text) return text.error();
            auto fresh = parse_otp_secret(text->reveal_text(), true);
            if (!fresh) return make_error("--token-secret @" + file_ + ": " + fresh.error().message);
            secret_ = std::move(*fresh);
        }
        Secret code = hotp_code(secret_.key, secret_.hash, secret_.counter);
        ++secret_.counter;
        ++tries_;
        if (!file_.empty()) {
            if (auto st = write_token_file(file_, format_otp_secret(secret_)); !st) return st.error();
        }
        LOG_INFO << "answering with an HOTP code from the soft token (next counter " << secret_.counter << ")";
        return code;
    }

private:
    SoftTokenMode mode_;
    OtpSecret secret_;
    std::string file_;
    std::function<std::int64_t()> now_;
    int tries_ = 0;
};

}  // namespace

Result<std::unique_ptr<SoftToken>> make_soft_token(SoftTokenMode mode, const Secret& secret_text,
                                                   std::function<std::int64_t()> now) {
    if (!now) now = [] { return static_cast<std::int64_t>(std::time(nullptr)); };
    std::string_view text = secret_text.reveal_text();
    std::string file;
    Secret from_file;
    if (!text.empty() && (text.front() == '@' || text.front() == '/')) {
        file = std::string(text.front() == '@' ? text.substr(1) : text);
        auto content = read_token_file(file);
        if (!content) return content.error();
        from_file = std::move(*content);
        text = from_file.reveal_text();
    }
    if (text.empty()) return make_error("--token-mode needs --token-secret (the key, or @FILE)");
    auto secret = parse_otp_secret(text, mode == SoftTokenMode::hotp);
    if (!secret) return make_error("--token-secret: " + secret.error().message);
    std::unique_ptr<SoftToken> token = std::make_unique<OathToken>(
        mode, std::move(*secret), mode == SoftTokenMode::hotp ? file : std::string(), std::move(now));
    return token;
}

}  // namespace espvpn::session
