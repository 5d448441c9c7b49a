#include "src/cli/channel_prompter.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocols/prompt/prompt_channel.h"
#include "src/cli/terminal_prompter.h"

namespace espvpn::cli {

namespace {

using prompt::FieldKind;
using prompt::Record;
using prompt::RecordType;

Record ask_record(std::string form, std::string name, FieldKind kind, std::string_view label) {
    Record r;
    r.type = RecordType::ask;
    r.form = std::move(form);
    r.name = std::move(name);
    r.kind = kind;
    r.label = std::string(label);
    return r;
}

Record text_record(RecordType type, std::string_view text) {
    Record r;
    r.type = type;
    r.text = std::string(text);
    return r;
}

}  // namespace

Status check_prompt_fd(int fd) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) return make_error("--prompt-fd " + std::to_string(fd) + ": " + std::strerror(errno));
    if (::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0)
        return make_error("--prompt-fd " + std::to_string(fd) + ": " + std::strerror(errno));
    return {};
}

Status ChannelPrompter::send(const Record& record) {
    const std::string line = prompt::encode(record);
    std::size_t done = 0;
    while (done < line.size()) {
        // A socket: no SIGPIPE when the program went away; a pipe: a plain write.
        ssize_t n = ::send(fd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK) n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return make_error(std::string("the prompt channel (--prompt-fd) is closed: ") + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
    return {};
}

Result<Secret> ChannelPrompter::ask(const Record& record) {
    if (auto st = send(record); !st) return st.error();
    const std::string what = record.type == RecordType::banner ? std::string("the banner") : "'" + record.label + "'";
    auto line = read_fd_line(fd_, "the answer to " + what + " on the prompt channel");
    if (!line) return line.error();
    auto answer = prompt::decode_answer(*line);
    if (!answer) return make_error("the prompt channel: " + answer.error().message);
    if (answer->cancelled) return make_error("the login was cancelled at " + what);
    return std::move(answer->value);
}

Result<std::string> ChannelPrompter::ask_text(std::string_view prompt) {
    auto v = ask(ask_record("", "", FieldKind::text, prompt));
    if (!v) return v.error();
    return std::string(v->reveal_text());
}

Result<Secret> ChannelPrompter::ask_secret(std::string_view prompt) {
    if (no_password_) return make_error("the server asks for '" + std::string(prompt) + "' but --no-passwd was given");
    return ask(ask_record("", "", FieldKind::password, prompt));
}

Result<Secret> ChannelPrompter::ask_pin(std::string_view prompt) {
    return ask(ask_record(std::string(prompt::kTokenPinForm), "pin", FieldKind::password, prompt));
}

Result<std::string> ChannelPrompter::ask_choice(std::string_view label, const std::vector<std::string>& choices) {
    Record r = ask_record("", "", FieldKind::select, label);
    r.choices = choices;
    auto v = ask(r);
    if (!v) return v.error();
    return std::string(v->reveal_text());
}

void ChannelPrompter::show(std::string_view message) { (void)send(text_record(RecordType::message, message)); }

Result<Secret> ChannelPrompter::ask_field(const session::LoginField& field) {
    const bool secret = field.kind == session::LoginField::Kind::secret;
    if (secret && no_password_)
        return make_error("the server asks for '" + field.label + "' but --no-passwd was given");
    return ask(ask_record(field.form, field.name, secret ? FieldKind::password : FieldKind::text, field.label));
}

Result<std::string> ChannelPrompter::ask_select(const session::LoginField& field) {
    Record r = ask_record(field.form, field.name, FieldKind::select, field.label);
    for (const auto& c : field.choices) r.choices.push_back(c.label);
    auto v = ask(r);
    if (!v) return v.error();
    return std::string(v->reveal_text());
}

Status ChannelPrompter::accept_banner(std::string_view text) {
    auto v = ask(text_record(RecordType::banner, text));
    if (!v) return make_error("the server's banner was not accepted (" + v.error().message + ")");
    return {};
}

void ChannelPrompter::form_message(std::string_view text, bool error) {
    (void)send(text_record(error ? RecordType::error : RecordType::message, text));
}

}  // namespace espvpn::cli
