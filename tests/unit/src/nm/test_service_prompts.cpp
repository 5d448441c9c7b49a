// The service's answers on espvpn's prompt channel (src/nm/service_prompts.h), the auth
// dialog's side of a prompt round (challenge_round) and the command's switch to the channel.
#include <doctest/doctest.h>

#include <algorithm>

#include "src/nm/auth_dialog.h"
#include "src/nm/service_prompts.h"
#include "tests/unit/src/nm/vpn_settings_fixture.h"

using namespace espvpn;
using namespace espvpn::nm;
using Kind = PromptStep::Kind;

namespace {

prompt::Record ask(prompt::FieldKind kind, std::string label, std::string form = "_login",
                   std::string name = "passwd") {
    prompt::Record r;
    r.type = prompt::RecordType::ask;
    r.form = std::move(form);
    r.name = std::move(name);
    r.kind = kind;
    r.label = std::move(label);
    return r;
}

prompt::Record text(prompt::RecordType type, std::string t) {
    prompt::Record r;
    r.type = type;
    r.text = std::move(t);
    return r;
}

const std::map<std::string, std::string> kRoundFlags = {
    {"gateway", "https://vpn.test/"}, {"challenge-flags", "2"}, {"challenge2-flags", "2"}, {"challenge3-flags", "2"}};

}  // namespace

TEST_CASE("service prompts: the password answers the first password prompt, a later one goes to the user") {
    ServicePrompts p(settings(kRoundFlags, {{"password", "pw"}}));
    auto first = p.on_record(ask(prompt::FieldKind::password, "Password:"));
    REQUIRE(first.kind == Kind::answer);
    CHECK(first.value.reveal_text() == "pw");
    CHECK(p.on_record(text(prompt::RecordType::message, "Enter the code from your token\x1b[2J")).kind == Kind::none);
    auto round = p.on_record(ask(prompt::FieldKind::password, "Enter response 1 of 2", "_challenge", "passwd"));
    REQUIRE(round.kind == Kind::ask_user);
    CHECK(p.waiting_for_user());
    // The server's words, escaped: no raw control character reaches nmcli's terminal.
    CHECK(round.message == "Enter the code from your token\\x1b[2J");
    REQUIRE(round.hints.size() == 2);
    CHECK(round.hints[0] == "challenge");
    CHECK(round.hints[1] == "x-espvpn-label:Enter response 1 of 2");
    auto answered = p.answer_from(settings(kRoundFlags, {{"password", "pw"}, {"challenge", "111111"}}));
    REQUIRE(answered.kind == Kind::answer);
    CHECK(answered.value.reveal_text() == "111111");
    CHECK_FALSE(p.waiting_for_user());
    // A second round gets a secret of its own (a client prefills a secret it already has).
    auto second = p.on_record(ask(prompt::FieldKind::password, "Enter response 2 of 2", "_challenge", "passwd"));
    REQUIRE(second.kind == Kind::ask_user);
    CHECK(second.hints[0] == "challenge2");
    CHECK(second.message == "Enter response 2 of 2");  // no message from the server: the label
    CHECK(p.answer_from(settings(kRoundFlags, {{"challenge", "111111"}, {"challenge2", "222222"}}))
              .value.reveal_text() == "222222");
    CHECK_FALSE(p.refused());
}

TEST_CASE("service prompts: an otp=yes profile's code answers the prompt after the password") {
    auto s = kRoundFlags;
    s["otp"] = "yes";
    ServicePrompts p(settings(s, {{"password", "pw"}, {"otp", "123456"}}));
    CHECK(p.on_record(ask(prompt::FieldKind::password, "Password:")).value.reveal_text() == "pw");
    CHECK(p.on_record(ask(prompt::FieldKind::password, "Code:", "_challenge")).value.reveal_text() == "123456");
    CHECK(p.on_record(ask(prompt::FieldKind::password, "Second code:", "_challenge")).kind == Kind::ask_user);
}

TEST_CASE("service prompts: lists take the server's default, banners are accepted, a token PIN is never the password") {
    ServicePrompts p(settings(kRoundFlags, {{"password", "pw"}}));
    auto group = ask(prompt::FieldKind::select, "GROUP:", "main", "group_list");
    group.choices = {"First Group", "group2"};
    CHECK(p.on_record(group).value.reveal_text() == "First Group");
    auto banner = p.on_record(text(prompt::RecordType::banner, "Welcome"));
    CHECK(banner.kind == Kind::answer);
    CHECK(banner.value.empty());
    CHECK(p.on_record(ask(prompt::FieldKind::password, "Enter PIN for token 'x'", std::string(prompt::kTokenPinForm),
                          "pin"))
              .kind == Kind::ask_user);
}

TEST_CASE("service prompts: a refusal cancels the next prompt (the password retry takes over)") {
    SUBCASE("an error record, then the form again (AnyConnect)") {
        ServicePrompts p(settings(kRoundFlags, {{"password", "pw"}}));
        p.on_record(ask(prompt::FieldKind::password, "Password:", "main", "password"));
        p.on_record(text(prompt::RecordType::error, "Login failed."));
        CHECK(p.on_record(ask(prompt::FieldKind::password, "Password:", "main", "password")).kind == Kind::cancel);
        CHECK(p.refused());
    }
    SUBCASE("ocserv's OTP form has the password's field name: the next prompt, not a refusal") {
        auto s = kRoundFlags;
        s["otp"] = "yes";
        ServicePrompts p(settings(s, {{"password", "pw"}, {"otp", "123456"}}));
        p.on_record(ask(prompt::FieldKind::password, "Password:", "main", "password"));
        p.on_record(text(prompt::RecordType::message, "Please enter your OTP password."));
        CHECK(p.on_record(ask(prompt::FieldKind::password, "Password:", "main", "password")).value.reveal_text() ==
              "123456");
        CHECK_FALSE(p.refused());
    }
    SUBCASE("the password's field asked again after a code, no error (a GP gateway after a wrong code)") {
        ServicePrompts p(settings(kRoundFlags, {{"password", "pw"}}));
        p.on_record(ask(prompt::FieldKind::password, "Password:"));
        REQUIRE(p.on_record(ask(prompt::FieldKind::password, "Code:", "_challenge")).kind == Kind::ask_user);
        p.answer_from(settings(kRoundFlags, {{"challenge", "000000"}}));
        CHECK(p.on_record(ask(prompt::FieldKind::password, "Password:")).kind == Kind::cancel);
        CHECK(p.refused());
    }
}

TEST_CASE("service prompts: a round is asked only when its secret is not saved, and at most three") {
    SUBCASE("no challenge-flags=2: cancelled, the log says what to add; not a refusal") {
        ServicePrompts p(settings({{"gateway", "https://vpn.test/"}}, {{"password", "pw"}}));
        p.on_record(ask(prompt::FieldKind::password, "Password:"));
        auto step = p.on_record(ask(prompt::FieldKind::password, "Code:", "_challenge"));
        CHECK(step.kind == Kind::cancel);
        CHECK(step.message.find("challenge-flags=2") != std::string::npos);
        CHECK_FALSE(p.refused());
    }
    SUBCASE("a fourth round") {
        ServicePrompts p(settings(kRoundFlags, {{"password", "pw"}}));
        p.on_record(ask(prompt::FieldKind::password, "Password:"));
        for (int i = 1; i <= 3; ++i) {
            REQUIRE(p.on_record(ask(prompt::FieldKind::password, "Code:", "_challenge")).kind == Kind::ask_user);
            p.answer_from(settings(kRoundFlags, {{challenge_secret(i), "1"}}));
        }
        CHECK(p.on_record(ask(prompt::FieldKind::password, "Code:", "_challenge")).kind == Kind::cancel);
    }
    SUBCASE("the user gave no answer") {
        ServicePrompts p(settings(kRoundFlags, {{"password", "pw"}}));
        p.on_record(ask(prompt::FieldKind::password, "Password:"));
        p.on_record(ask(prompt::FieldKind::password, "Code:", "_challenge"));
        CHECK(p.answer_from(settings(kRoundFlags, {{"password", "pw"}})).kind == Kind::cancel);
    }
}

TEST_CASE("auth dialog: a prompt round is one field, labelled and described in the server's words") {
    CHECK_FALSE(challenge_round({"password", "x-vpn-message:The server rejected the password. Try again."}));
    CHECK_FALSE(challenge_round({"challengeX"}));
    auto round = challenge_round({"challenge2", "x-espvpn-label:Enter response 2 of 2\x07",
                                  "x-vpn-message:Second factor\x1b]0;"});
    REQUIRE(round);
    CHECK(round->field.key == "challenge2");
    CHECK(round->field.label == "Enter response 2 of 2\\x07");
    CHECK(round->field.should_ask);
    CHECK(round->message == "Second factor\\x1b]0;");
    std::vector<AskedSecret> asked;
    asked.push_back(std::move(round->field));
    const std::string reply = external_ui_reply("work", settings({{"gateway", "https://vpn.test/"}}, {}), asked,
                                                round->message);
    CHECK(reply.find("[challenge2]") != std::string::npos);
    CHECK(reply.find("Label=Enter response 2 of 2\\\\x07") != std::string::npos);
    CHECK(reply.find("Description=Second factor\\\\x1b]0;") != std::string::npos);
    CHECK(reply.find("[password]") == std::string::npos);
}

TEST_CASE("espvpn command: a password login moves to the prompt channel, nothing on stdin") {
    auto cmd = espvpn_command("/usr/sbin/espvpn", "helper",
                              settings({{"gateway", "https://vpn.test/"}, {"protocol", "gp"}}, {{"password", "pw"}}), 0);
    REQUIRE(cmd);
    REQUIRE(use_prompt_channel(*cmd, 7));
    CHECK(std::find(cmd->argv.begin(), cmd->argv.end(), "--prompt-fd=7") != cmd->argv.end());
    CHECK(std::find(cmd->argv.begin(), cmd->argv.end(), "--passwd-on-stdin") == cmd->argv.end());
    CHECK(cmd->stdin_line.empty());
    auto cookie = espvpn_command("/usr/sbin/espvpn", "helper",
                                 settings({{"gateway", "https://vpn.test/"}}, {{"cookie", "c"}}), 0);
    REQUIRE(cookie);
    CHECK_FALSE(use_prompt_channel(*cookie, 7));
    CHECK(cookie->stdin_line.reveal_text() == "c");
}
