#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "protocols/http/secret_buffer.h"
#include "tests/unit/vm_flags.h"

using espvpn::http::SecretBuffer;

using espvpn::test::vm_flags_of;

// HTTP requests and replies carry cookies and passwords: the buffer they are built
// in grows inside Secret pages (no core dump), and keeps its content across growth.
TEST_CASE("SecretBuffer: grows in no-dump pages, keeps its bytes, empties on move and clear") {
    SecretBuffer b;
    CHECK(b.empty());
    CHECK(b.text().empty());
    std::string expect;
    for (int i = 0; i < 2000; ++i) {
        const std::string piece = "authcookie=" + std::to_string(i) + "&";
        b.append(piece);
        expect += piece;
    }
    CHECK(b.text() == expect);
    CHECK(vm_flags_of(b.bytes().data()).find(" dd ") != std::string::npos);
    SecretBuffer moved = std::move(b);
    CHECK(moved.text() == expect);
    CHECK(b.empty());
    auto secret = moved.take_secret();
    CHECK(secret.reveal_text() == expect);
    CHECK(moved.empty());
    moved.append("x");
    CHECK(moved.text() == "x");
    moved.clear();
    CHECK(moved.text().empty());
}

// A response body limited to N bytes never gets a buffer of 2N: the doubling stops at
// the limit (an endless chunked body up to 16 MiB had grown it to 32 MiB).
TEST_CASE("SecretBuffer: growth stops at its limit, and still takes what it is given") {
    SecretBuffer b;
    b.limit_growth(1000);
    b.append(std::string(600, 'a'));
    b.append(std::string(400, 'b'));
    CHECK(b.size() == 1000);
    CHECK(b.capacity() == 1000);
    b.append("c");  // past the limit: the owner decides; the buffer still holds it
    CHECK(b.size() == 1001);
    CHECK(b.text().substr(998) == "bbc");
}
