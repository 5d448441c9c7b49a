// The prompt channel of espvpn --prompt-fd (protocols/prompt/prompt_channel.h).
#include <doctest/doctest.h>

#include <algorithm>

#include "protocols/prompt/prompt_channel.h"

using namespace espvpn;
using namespace espvpn::prompt;

namespace {

Record ask(FieldKind kind, std::string label, std::vector<std::string> choices = {}) {
    Record r;
    r.type = RecordType::ask;
    r.form = "main";
    r.name = kind == FieldKind::select ? "group_list" : "password";
    r.kind = kind;
    r.label = std::move(label);
    r.choices = std::move(choices);
    return r;
}

}  // namespace

TEST_CASE("prompt channel: an ask record is one line of escaped fields") {
    const auto line = encode(ask(FieldKind::password, "Password:"));
    CHECK(line == "ask\tmain\tpassword\tpassword\tPassword:\n");
    auto back = decode(std::string_view(line).substr(0, line.size() - 1));
    REQUIRE(back);
    CHECK(back->type == RecordType::ask);
    CHECK(back->form == "main");
    CHECK(back->name == "password");
    CHECK(back->kind == FieldKind::password);
    CHECK(back->label == "Password:");
}

TEST_CASE("prompt channel: hostile server text stays in its field and on one line") {
    // A label that tries to end the record, start another, and reach a terminal.
    const std::string hostile = "Code:\tselect\tx\nask\tmain\tpw\tpassword\tPIN\r\x1b]0;owned\x07\\x41\x7f";
    auto r = ask(FieldKind::select, hostile, {"First\tGroup", "g2\n", "\x1b[31mred"});
    const auto line = encode(r);
    REQUIRE(line.back() == '\n');
    for (std::size_t i = 0; i + 1 < line.size(); ++i) {
        const auto c = static_cast<unsigned char>(line[i]);
        CHECK(((c >= 0x20 && c != 0x7f) || c == 0x09));
    }
    // Only the separators are raw TABs: 4 fields + 3 choices.
    CHECK(std::count(line.begin(), line.end(), '\t') == 7);
    auto back = decode(std::string_view(line).substr(0, line.size() - 1));
    REQUIRE(back);
    CHECK(back->label == hostile);
    REQUIRE(back->choices.size() == 3);
    CHECK(back->choices[0] == "First\tGroup");
    CHECK(back->choices[1] == "g2\n");
    CHECK(back->choices[2] == "\x1b[31mred");
}

TEST_CASE("prompt channel: banner, message and error records carry one text") {
    for (auto type : {RecordType::banner, RecordType::message, RecordType::error}) {
        Record r;
        r.type = type;
        r.text = "Welcome.\nAuthorised use only.\\";
        const auto line = encode(r);
        auto back = decode(std::string_view(line).substr(0, line.size() - 1));
        REQUIRE(back);
        CHECK(back->type == type);
        CHECK(back->text == r.text);
    }
    CHECK(encode(Record{RecordType::error, {}, {}, {}, {}, {}, "Login failed."}) == "error\tLogin failed.\n");
}

TEST_CASE("prompt channel: malformed records are errors") {
    CHECK_FALSE(decode("ask\tmain\tpassword\tpassword"));             // no label
    CHECK_FALSE(decode("ask\tmain\tpassword\tsecret\tPassword:"));    // unknown kind
    CHECK_FALSE(decode("ask\tmain\tgroup_list\tselect\tGROUP:"));    // select without choices
    CHECK_FALSE(decode("ask\tmain\tpassword\tpassword\tPassword:\textra"));
    CHECK_FALSE(decode("prompt\tPassword:"));                         // unknown type
    CHECK_FALSE(decode("message"));                                   // no text
    CHECK_FALSE(decode("message\ta\tb"));
    CHECK_FALSE(decode("message\tbell\x07"));                         // raw control character
    CHECK_FALSE(decode("message\tbad \\q escape"));
    CHECK_FALSE(decode("message\tbad \\x4 hex"));
    CHECK_FALSE(decode("message\tbad \\xg0 hex"));
    CHECK_FALSE(decode("message\tlone \\"));
    CHECK_FALSE(decode(std::string("message\t") + std::string(kMaxLine, 'a')));
    auto ok = decode("message\t\\x41\\x1b");
    REQUIRE(ok);
    CHECK(ok->text == "A\x1b");
}

TEST_CASE("prompt channel: answers") {
    auto line = encode_answer(Secret::from_string("p\\ss\tw=rd"));
    REQUIRE(line);
    CHECK(line->reveal_text() == "=p\\ss\tw=rd\n");
    CHECK_FALSE(encode_answer(Secret::from_string("two\nlines")));
    CHECK_FALSE(encode_answer(Secret::from_string("cr\r")));
    auto empty = encode_answer(Secret());
    REQUIRE(empty);
    CHECK(empty->reveal_text() == "=\n");

    auto a = decode_answer(Secret::from_string("=hunter2"));
    REQUIRE(a);
    CHECK_FALSE(a->cancelled);
    CHECK(a->value.reveal_text() == "hunter2");
    auto c = decode_answer(Secret::from_string("cancel"));
    REQUIRE(c);
    CHECK(c->cancelled);
    auto e = decode_answer(Secret::from_string("="));
    REQUIRE(e);
    CHECK(e->value.empty());
    CHECK_FALSE(decode_answer(Secret::from_string("hunter2")));
    CHECK_FALSE(decode_answer(Secret()));
}
