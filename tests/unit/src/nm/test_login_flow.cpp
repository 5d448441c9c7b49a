// The login window's decisions (src/nm/login_flow.h).
#include <doctest/doctest.h>

#include "src/nm/login_flow.h"
#include "tests/unit/src/nm/vpn_settings_fixture.h"

using namespace espvpn;
using namespace espvpn::nm;

namespace {

prompt::Record ask(prompt::FieldKind kind, std::string form = "_login", std::string name = "passwd") {
    prompt::Record r;
    r.type = prompt::RecordType::ask;
    r.form = std::move(form);
    r.name = std::move(name);
    r.kind = kind;
    r.label = "Password:";
    return r;
}

const char* kOutput = "COOKIE='authcookie=abc&user=alice'\nHOST='192.0.2.1'\nCONNECT_URL='https://vpn.test/'\n"
                      "FINGERPRINT='pin-sha256:AAAA'\nRESOLVE='vpn.test:192.0.2.1'\n";

}  // namespace

TEST_CASE("login window: the stored password answers the first password prompt of the first run only") {
    auto s = settings({{"gateway", "https://vpn.test/"}}, {{"password", "stored"}});
    LoginFlow flow(s, false);
    flow.start_run();
    CHECK(flow.automatic_answer(ask(prompt::FieldKind::text, "_login", "user")) == nullptr);
    const Secret* first = flow.automatic_answer(ask(prompt::FieldKind::password));
    REQUIRE(first);
    CHECK(first->reveal_text() == "stored");
    // The OTP challenge after it is the user's.
    CHECK(flow.automatic_answer(ask(prompt::FieldKind::password, "_challenge")) == nullptr);
    // Refused: the next run asks the user.
    flow.start_run();
    CHECK(flow.automatic_answer(ask(prompt::FieldKind::password)) == nullptr);

    // -r: the stored one was refused before.
    LoginFlow again(s, true);
    again.start_run();
    CHECK(again.automatic_answer(ask(prompt::FieldKind::password)) == nullptr);
}

TEST_CASE("login window: the typed password goes back to NetworkManager only when its flags keep it") {
    for (auto [flags, kept] : {std::pair{"", true}, {"0", true}, {"1", true}, {"2", false}, {"4", false}, {"3", false}}) {
        CAPTURE(flags);
        std::map<std::string, std::string> data{{"gateway", "https://vpn.test/"}};
        if (*flags) data["password-flags"] = flags;
        LoginFlow flow(settings(data, {}), false);
        flow.start_run();
        flow.answered(ask(prompt::FieldKind::text, "_login", "user"), Secret::from_string("alice"));
        flow.answered(ask(prompt::FieldKind::password), Secret::from_string("typed"));
        flow.answered(ask(prompt::FieldKind::password, "_challenge"), Secret::from_string("123456"));
        auto out = flow.secrets(kOutput);
        REQUIRE(out);
        CHECK(out->at("cookie").reveal_text() == "authcookie=abc&user=alice");
        CHECK(out->at("gateway").reveal_text() == "https://vpn.test/");
        CHECK(out->count("password") == (kept ? 1u : 0u));
        if (kept) CHECK(out->at("password").reveal_text() == "typed");  // not the one-time code
        for (const auto& [key, value] : *out) CHECK(value.reveal_text() != "123456");
    }
    // The stored password that logged in is not sent back (NetworkManager has it).
    LoginFlow stored(settings({{"gateway", "https://vpn.test/"}}, {{"password", "stored"}}), false);
    stored.start_run();
    REQUIRE(stored.automatic_answer(ask(prompt::FieldKind::password)));
    stored.answered(ask(prompt::FieldKind::password, "_challenge"), Secret::from_string("123456"));
    auto out = stored.secrets(kOutput);
    REQUIRE(out);
    CHECK(out->count("password") == 0);
    CHECK_FALSE(stored.secrets("HOST='x'\n"));  // no cookie
}

TEST_CASE("login window: a failed run says its last error line") {
    CHECK(failure_text("progress\nerror: portal login on vpn.test failed: Invalid username or password\nbye\n") ==
          "portal login on vpn.test failed: Invalid username or password");
    CHECK(failure_text("only a line\n") == "only a line");
    CHECK(failure_text("") == "");
}

TEST_CASE("login window: a token's PIN prompt is never answered by the stored password, nor kept as it") {
    auto s = settings({{"gateway", "https://vpn.test/"}}, {{"password", "stored"}});
    LoginFlow flow(s, false);
    flow.start_run();
    // espvpn asks the PIN of the client key before the login form (form "token").
    const auto pin = ask(prompt::FieldKind::password, std::string(prompt::kTokenPinForm), "pin");
    CHECK(flow.automatic_answer(pin) == nullptr);
    flow.answered(pin, Secret::from_string("4711"));
    // The stored password still answers the login form's password after it.
    const Secret* first = flow.automatic_answer(ask(prompt::FieldKind::password));
    REQUIRE(first);
    CHECK(first->reveal_text() == "stored");

    LoginFlow typed(settings({{"gateway", "https://vpn.test/"}}, {}), false);
    typed.start_run();
    typed.answered(pin, Secret::from_string("4711"));
    auto out = typed.secrets(kOutput);
    REQUIRE(out);
    CHECK(out->count("password") == 0);
}
