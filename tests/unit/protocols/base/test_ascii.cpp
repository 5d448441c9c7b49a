#include <doctest/doctest.h>

#include <string>

#include "protocols/base/ascii.h"

using espvpn::printable;

TEST_CASE("printable: terminal escape sequences from a server are shown, not obeyed") {
    // OSC (set the window title, ended by BEL) and CSI (clear the screen).
    CHECK(printable("hi\x1b]0;pwned\x07 there\x1b[2J") == "hi\\x1b]0;pwned\\x07 there\\x1b[2J");
    // Every other C0 control and DEL; CR (which rewrites the line) too.
    CHECK(printable(std::string("a\0b\rc\x7f\x08", 7)) == "a\\x00b\\x0dc\\x7f\\x08");
    // C1 controls as UTF-8 (U+009B is a one-character CSI on some terminals) and as raw bytes.
    CHECK(printable("x\xc2\x9b" "2Jy") == "x\\xc2\\x9b2Jy");
    CHECK(printable("x\x9b" "2J\x85") == "x\\x9b2J\\x85");
}

TEST_CASE("printable: banners keep their lines, tabs and UTF-8") {
    const std::string banner = "Welcome\n\tAuthorised use only \xe2\x80\x94 caf\xc3\xa9 \xf0\x9f\x94\x92\n";
    CHECK(printable(banner) == banner);
    CHECK(printable("") == "");
    CHECK(printable("C:\\path") == "C:\\path");
}

TEST_CASE("printable: invalid UTF-8 is escaped byte by byte") {
    CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");              // overlong '/'
    CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");     // a UTF-16 surrogate
    CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
    CHECK(printable("ok\xe2\x80") == "ok\\xe2\\x80");           // cut short
    CHECK(printable("\xe2(x") == "\\xe2(x");                   // a bad continuation
}
