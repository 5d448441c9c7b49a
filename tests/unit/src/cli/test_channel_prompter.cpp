// espvpn --prompt-fd: the ChannelPrompter over a real socketpair, the program's end read
// and answered here (src/cli/channel_prompter.h, protocols/prompt/prompt_channel.h).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "protocols/prompt/prompt_channel.h"
#include "src/cli/channel_prompter.h"

using namespace espvpn;
using espvpn::cli::ChannelPrompter;
using espvpn::session::LoginField;

namespace {

struct Pair {
    int espvpn = -1, program = -1;
    Pair() {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        espvpn = fds[0];
        program = fds[1];
    }
    ~Pair() {
        if (espvpn >= 0) ::close(espvpn);
        if (program >= 0) ::close(program);
    }
    // One line the program reads (without '\n').
    std::string read_line() const {
        std::string line;
        char c;
        while (::read(program, &c, 1) == 1 && c != '\n') line += c;
        return line;
    }
    void answer(const std::string& line) const { REQUIRE(::write(program, (line + "\n").data(), line.size() + 1) > 0); }
};

}  // namespace

TEST_CASE("prompt channel: a field is asked with its form, name and kind; the answer line comes back") {
    Pair p;
    ChannelPrompter prompter(p.espvpn, false);
    std::string asked;
    std::thread program([&] {
        asked = p.read_line();
        p.answer("=hunter2\tx");
    });
    auto v = prompter.ask_field({LoginField::Kind::secret, "_login", "passwd", "Password:", {}, false});
    program.join();
    CHECK(asked == "ask\t_login\tpasswd\tpassword\tPassword:");
    REQUIRE(v);
    CHECK(v->reveal_text() == "hunter2\tx");
}

TEST_CASE("prompt channel: a select lists its labels; a label from a hostile server stays one field") {
    Pair p;
    ChannelPrompter prompter(p.espvpn, false);
    LoginField f{LoginField::Kind::select, "main", "group_list", "GROUP:\nask\tx\tpassword", {}, false};
    f.choices = {{"g1", "First\tGroup"}, {"g2", "group2\x1b[2J"}};
    std::string asked;
    std::thread program([&] {
        asked = p.read_line();
        p.answer("=group2\x1b[2J");
    });
    auto v = prompter.ask_select(f);
    program.join();
    auto record = prompt::decode(asked);
    REQUIRE(record);
    CHECK(record->kind == prompt::FieldKind::select);
    CHECK(record->label == f.label);
    REQUIRE(record->choices.size() == 2);
    CHECK(record->choices[0] == "First\tGroup");
    CHECK(asked.find('\n') == std::string::npos);
    CHECK(asked.find('\x1b') == std::string::npos);
    REQUIRE(v);
    CHECK(*v == "group2\x1b[2J");
}

TEST_CASE("prompt channel: cancel, a bad answer and a closed channel end the login with an error") {
    {
        Pair p;
        ChannelPrompter prompter(p.espvpn, false);
        std::thread program([&] {
            p.read_line();
            p.answer("cancel");
        });
        auto v = prompter.ask_text("Username:");
        program.join();
        REQUIRE_FALSE(v);
        CHECK(v.error().message.find("cancelled") != std::string::npos);
    }
    {
        Pair p;
        ChannelPrompter prompter(p.espvpn, false);
        std::thread program([&] {
            p.read_line();
            p.answer("hunter2");  // no '='
        });
        auto v = prompter.ask_secret("Password:");
        program.join();
        CHECK_FALSE(v);
    }
    {
        Pair p;
        ::close(p.program);
        p.program = -1;
        ChannelPrompter prompter(p.espvpn, false);
        CHECK_FALSE(prompter.ask_secret("Password:"));  // no SIGPIPE: an error
        CHECK_FALSE(prompter.accept_banner("Welcome"));
    }
    {
        Pair p;
        ChannelPrompter prompter(p.espvpn, true);  // --no-passwd
        CHECK_FALSE(prompter.ask_field({LoginField::Kind::secret, "main", "password", "Password:", {}, false}));
    }
}

TEST_CASE("prompt channel: a banner waits for acceptance; messages and errors need no answer") {
    Pair p;
    ChannelPrompter prompter(p.espvpn, false);
    CHECK(prompter.offers_defaults());
    prompter.form_message("Login failed.", true);
    prompter.form_message("Please enter your password.", false);
    prompter.show("SAML login required");
    CHECK(p.read_line() == "error\tLogin failed.");
    CHECK(p.read_line() == "message\tPlease enter your password.");
    CHECK(p.read_line() == "message\tSAML login required");
    std::thread program([&] {
        CHECK(p.read_line() == "banner\tAuthorised use only.\\nBye");
        p.answer("cancel");
    });
    auto st = prompter.accept_banner("Authorised use only.\nBye");
    program.join();
    CHECK_FALSE(st);
}

TEST_CASE("prompt channel: --prompt-fd must be open and is made close-on-exec") {
    Pair p;
    CHECK(cli::check_prompt_fd(p.espvpn));
    int fd = ::fcntl(p.program, F_DUPFD, 100);  // without close-on-exec
    REQUIRE(fd >= 0);
    CHECK(cli::check_prompt_fd(fd));
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    ::close(fd);
    CHECK_FALSE(cli::check_prompt_fd(fd));
}

TEST_CASE("prompt channel: a token's PIN is a password field of form 'token', never refused by --no-passwd") {
    Pair p;
    ChannelPrompter prompter(p.espvpn, true);
    std::string asked;
    std::thread program([&] {
        asked = p.read_line();
        p.answer("=4711");
    });
    auto v = prompter.ask_pin("Enter PIN for token 'espvpn-test' (pkcs11:token=espvpn-test):");
    program.join();
    CHECK(asked == "ask\ttoken\tpin\tpassword\tEnter PIN for token 'espvpn-test' (pkcs11:token=espvpn-test):");
    REQUIRE(v);
    CHECK(v->reveal_text() == "4711");
}
