// LoginAnswers: the order in which a login field gets its value (soft token, -F,
// prompt), select matching, and the soft token's HOTP file write-back.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/session/login_answers.h"
#include "src/session/soft_token.h"

using namespace espvpn;
using namespace espvpn::session;

namespace {

// Answers from a script; records what was asked. No answers left: an error as --non-inter gives.
struct ScriptedPrompter : LoginPrompter {
    std::vector<std::string> answers;
    std::vector<std::string> asked;
    Result<std::string> next(std::string_view prompt) {
        asked.emplace_back(prompt);
        if (answers.empty()) return make_error("user input required ('" + std::string(prompt) + "') but --non-inter was given");
        std::string a = answers.front();
        answers.erase(answers.begin());
        return a;
    }
    Result<std::string> ask_text(std::string_view p) override { return next(p); }
    Result<Secret> ask_secret(std::string_view p) override {
        auto a = next(p);
        if (!a) return a.error();
        return Secret::from_string(*a);
    }
    void show(std::string_view m) override { asked.push_back("show:" + std::string(m)); }
};

LoginField group_list() {
    LoginField f;
    f.kind = LoginField::Kind::select;
    f.form = "main";
    f.name = "group_list";
    f.label = "GROUP:";
    f.choices = {{"group1", "First Group"}, {"group2", "group2"}};
    return f;
}

std::string text(const Result<Secret>& s) { return std::string(s->reveal_text()); }

}  // namespace

TEST_CASE("match_choice: label (any case), unique prefix, value; else the labels offered") {
    auto f = group_list();
    CHECK((*match_choice(f, "first group"))->value == "group1");
    CHECK((*match_choice(f, "FIRST"))->value == "group1");
    CHECK((*match_choice(f, "group1"))->value == "group1");  // openconnect refuses a value; we accept it
    CHECK((*match_choice(f, "g"))->value == "group2");       // only "group2" starts with g (labels compared)
    auto missing = match_choice(f, "nope");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message.find("not offered; the server offers [First Group|group2]") != std::string::npos);
    f.choices.push_back({"group3", "group3"});
    auto ambiguous = match_choice(f, "gro");
    REQUIRE_FALSE(ambiguous);
    CHECK(ambiguous.error().message.find("not unique") != std::string::npos);
}

TEST_CASE("form entries: FORM:FIELD=VALUE, the value may hold ':' and '='") {
    auto e = parse_form_entry("main:method=sms");
    REQUIRE(e);
    CHECK(e->form == "main");
    CHECK(e->field == "method");
    CHECK(e->value == "sms");
    auto v = parse_form_entry("_login:passwd=a:b=c");
    REQUIRE(v);
    CHECK(v->value == "a:b=c");
    CHECK_FALSE(parse_form_entry("nocolon=1"));
    CHECK_FALSE(parse_form_entry(":field=1"));
    CHECK_FALSE(parse_form_entry("form:=1"));
    CHECK_FALSE(parse_form_entry("form:field"));
}

TEST_CASE("fill: -F for the named form and field only, else the prompter") {
    ScriptedPrompter p;
    p.answers = {"typed"};
    LoginAnswers a(p, {{"main", "username", "fromF"}, {"other", "password", "wrong-form"}}, nullptr);
    CHECK(text(a.fill({LoginField::Kind::text, "main", "username", "Username:", {}, false})) == "fromF");
    CHECK(p.asked.empty());
    CHECK(text(a.fill({LoginField::Kind::secret, "main", "password", "Password:", {}, false})) == "typed");
    CHECK(p.asked == std::vector<std::string>{"Password:"});
}

TEST_CASE("choose: --authgroup, then -F, then asked with the choices; non-inter names field and choices") {
    ScriptedPrompter p;
    LoginAnswers none(p, {}, nullptr);
    auto f = group_list();
    CHECK((*none.choose(f, "group2"))->value == "group2");
    CHECK_FALSE(none.choose(f, "nosuch"));  // an explicit preset that matches nothing is an error
    auto failed = none.choose(f);
    REQUIRE_FALSE(failed);
    CHECK(p.asked.back() == "GROUP: [First Group|group2]:");
    CHECK(failed.error().message.find("main:group_list offers [First Group|group2]") != std::string::npos);
    CHECK(failed.error().message.find("--form-entry main:group_list=") != std::string::npos);

    LoginAnswers with_f(p, {{"main", "group_list", "first"}}, nullptr);
    CHECK((*with_f.choose(f))->value == "group1");

    ScriptedPrompter typed;
    typed.answers = {"bogus", "Group2"};  // a wrong answer is asked again
    LoginAnswers ask(typed, {}, nullptr);
    CHECK((*ask.choose(f))->value == "group2");
    CHECK(typed.asked.size() == 3);  // ask, show the error, ask

    LoginField single = f;
    single.choices.resize(1);
    CHECK((*none.choose(single))->value == "group1");  // one choice: taken without asking
}

TEST_CASE("soft token: answers token fields before -F and the prompt; two codes, then the user") {
    ScriptedPrompter p;
    p.answers = {"999999"};
    io::LocalStateFiles files;
    auto token = make_soft_token(SoftTokenMode::totp, Secret::from_string("base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"),
                                 files, [] { return std::int64_t{59}; });
    REQUIRE(token);
    LoginAnswers a(p, {{"_challenge", "passwd", "fromF"}}, std::shared_ptr<SoftToken>(std::move(*token)));
    LoginField otp{LoginField::Kind::secret, "_challenge", "passwd", "Challenge:", {}, true};
    CHECK(text(a.fill(otp)) == "287082");  // RFC 6238 at T=59, six digits
    CHECK(text(a.fill(otp)) == "359152");  // the next step, T=89: HOTP counter 2 (openconnect's second try)
    CHECK(text(a.fill(otp)) == "fromF");   // refused twice: the token is not used again
    LoginField plain = otp;
    plain.token = false;
    plain.form = "main";
    CHECK(text(a.fill(plain)) == "999999");
}

TEST_CASE("soft token: bad secrets and modes are refused clearly") {
    io::LocalStateFiles files;
    auto empty = make_soft_token(SoftTokenMode::totp, Secret(), files);
    REQUIRE_FALSE(empty);
    CHECK(empty.error().message.find("--token-secret") != std::string::npos);
    auto missing = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@/nonexistent/espvpn-token"), files);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message.find("/nonexistent/espvpn-token") != std::string::npos);
    CHECK_FALSE(make_soft_token(SoftTokenMode::totp, Secret::from_string("base32:1111"), files));
}

TEST_CASE("soft token: HOTP @FILE gets the next counter written back, in its own format") {
    char dir[] = "/tmp/espvpn-hotp-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string path = std::string(dir) + "/token";
    std::ofstream(path) << "base32:gezdgnbvgy3tqojqgezdgnbvgy3tqojq,5\n";
    io::LocalStateFiles files;
    auto token = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@" + path), files);
    REQUIRE(token);
    auto first = (*token)->next_code();
    REQUIRE(first);
    CHECK(first->reveal_text() == "254676");  // RFC 4226 counter 5
    auto read = [&] {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    CHECK(read() == "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,6");
    // Another process used the token meanwhile: the file's counter is taken.
    std::ofstream(path) << "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,8";
    auto second = (*token)->next_code();
    REQUIRE(second);
    CHECK(second->reveal_text() == "399871");  // counter 8
    CHECK(read() == "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,9");
    ::unlink(path.c_str());
    ::rmdir(dir);
}

namespace {

// A program's prompter (espvpn --prompt-fd): sees the whole field, not only its label.
struct FieldPrompter : ScriptedPrompter {
    std::vector<LoginField> fields;
    Result<Secret> ask_field(const LoginField& f) override {
        fields.push_back(f);
        return Secret::from_string("typed");
    }
    Result<std::string> ask_select(const LoginField& f) override {
        fields.push_back(f);
        return std::string("grou");  // a prefix: matched as any answer is
    }
};

}  // namespace

TEST_CASE("LoginAnswers: a prompter that wants fields gets the form, the name and the kind") {
    FieldPrompter p;
    LoginAnswers answers(p, {}, nullptr);
    auto secret = answers.fill({LoginField::Kind::secret, "_challenge", "passwd", "Code:", {}, false});
    REQUIRE(secret);
    CHECK(text(secret) == "typed");
    auto f = group_list();
    f.label.clear();  // unlabelled: asked by its name
    auto chosen = answers.choose(f);
    REQUIRE(chosen);
    CHECK((*chosen)->value == "group2");
    REQUIRE(p.fields.size() == 2);
    CHECK(p.fields[0].form == "_challenge");
    CHECK(p.fields[0].kind == LoginField::Kind::secret);
    CHECK(p.fields[1].name == "group_list");
    CHECK(p.fields[1].label == "group_list:");
    CHECK(p.fields[1].choices.size() == 2);
    CHECK(p.asked.empty());  // nothing through the label-only prompts
}
