#include <doctest/doctest.h>

#include "protocols/http/form.h"

using namespace espvpn;
using namespace espvpn::http;

TEST_CASE("percent_encode escapes like OpenConnect: lowercase hex, unreserved kept") {
    CHECK(percent_encode("AZaz09-_.~") == "AZaz09-_.~");
    CHECK(percent_encode("a b,c") == "a%20b%2cc");
    CHECK(percent_encode("x=1&y") == "x%3d1%26y");
    CHECK(percent_encode(std::string("\x00\xff", 2)) == "%00%ff");
}

TEST_CASE("percent_decode round-trips and rejects broken escapes") {
    auto r = percent_decode("a%20b%2Cc+d");
    REQUIRE(r.ok());
    CHECK(*r == "a b,c d");
    CHECK_FALSE(percent_decode("abc%2").ok());
    CHECK_FALSE(percent_decode("abc%").ok());
    CHECK_FALSE(percent_decode("%zz").ok());
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    auto back = percent_decode(percent_encode(all));
    REQUIRE(back.ok());
    CHECK(*back == all);
}

TEST_CASE("parse_form splits and decodes pairs") {
    auto r = parse_form("user=alice&authcookie=ab%2bcd&empty=&flag&&");
    REQUIRE(r.ok());
    REQUIRE(r->size() == 4);
    CHECK((*r)[0] == std::pair<std::string, std::string>{"user", "alice"});
    CHECK((*r)[1].second == "ab+cd");
    CHECK((*r)[2].second.empty());
    CHECK((*r)[3].first == "flag");
    CHECK_FALSE(parse_form("a=%g0").ok());
}

TEST_CASE("FormBody builds a Secret body, raw values unencoded") {
    FormBody f;
    f.add_raw("prot", "https:").add("user", "a b").add("passwd", Secret::from_string("p&ss"));
    for (int i = 0; i < 50; ++i) f.add("k", "value that forces the buffer to grow");
    Secret body = f.finish();
    std::string text(body.reveal_text());
    CHECK(text.rfind("prot=https:&user=a%20b&passwd=p%26ss&k=", 0) == 0);
}
