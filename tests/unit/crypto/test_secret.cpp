#include <doctest/doctest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "crypto/secret.h"
#include "tests/unit/vm_flags.h"

using espvpn::Secret;

TEST_CASE("Secret streams as <redacted>, never its content") {
    Secret s = Secret::from_string("hunter2");
    std::ostringstream os;
    os << "password=" << s;
    CHECK(os.str() == "password=<redacted>");
    CHECK(os.str().find("hunter2") == std::string::npos);
}

TEST_CASE("Secret holds its bytes and compares in constant time") {
    Secret a = Secret::from_string("abc");
    Secret b = Secret::from_string("abc");
    Secret c = Secret::from_string("abd");
    CHECK(a.size() == 3);
    CHECK(a.reveal_text() == "abc");
    CHECK(a.equals(b));
    CHECK_FALSE(a.equals(c));
    CHECK_FALSE(a.equals(Secret::from_string("ab")));
}

TEST_CASE("Secret moves leave the source empty; clone is explicit") {
    Secret a = Secret::from_string("key");
    Secret b = std::move(a);
    CHECK(a.empty());  // NOLINT(bugprone-use-after-move): the point of the test
    CHECK(b.reveal_text() == "key");
    Secret c = b.clone();
    CHECK(c.equals(b));
    b.clear();
    CHECK(b.empty());
    CHECK(c.reveal_text() == "key");
}

TEST_CASE("Secret zeroes its storage on clear") {
    Secret s = Secret::from_string("topsecret");
    // Check the zeroing routine on the storage itself while it is still owned.
    auto bytes = s.reveal_mutable();
    espvpn::secure_zero(bytes.data(), bytes.size());
    for (auto b : s.reveal()) CHECK(b == 0);
}

TEST_CASE("Secret::from_hex parses GlobalProtect key strings") {
    auto k = Secret::from_hex("0x00112233445566778899AABBccddeeff");
    REQUIRE(k.ok());
    CHECK(k->size() == 16);
    CHECK(k->reveal()[0] == 0x00);
    CHECK(k->reveal()[10] == 0xaa);
    CHECK(k->reveal()[15] == 0xff);

    auto odd = Secret::from_hex("abc");
    REQUIRE_FALSE(odd.ok());
    CHECK(odd.error().message.find("odd") != std::string::npos);

    auto bad = Secret::from_hex("zz11");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find("position 0") != std::string::npos);
    CHECK(bad.error().message.find("zz") == std::string::npos);  // never echo key text

    auto empty = Secret::from_hex("");
    REQUIRE(empty.ok());
    CHECK(empty->empty());
}

using espvpn::test::vm_flags_of;

// A core dump or swap must never hold a key or a password: the pages of a Secret
// are marked "dd" (MADV_DONTDUMP) and, where RLIMIT_MEMLOCK allows (root always),
// "lo" (mlock).
TEST_CASE("Secret bytes live in no-dump, locked pages") {
    Secret key = Secret::from_string("0123456789abcdef0123456789abcdef");
    const std::string flags = vm_flags_of(key.reveal().data());
    CAPTURE(flags);
    REQUIRE_FALSE(flags.empty());
    CHECK(flags.find(" dd ") != std::string::npos);
    rlimit lim{};
    REQUIRE(getrlimit(RLIMIT_MEMLOCK, &lim) == 0);
    // AddressSanitizer's runtime turns mlock into a no-op (it warns "mlock is not supported").
#if !defined(__SANITIZE_ADDRESS__)
    if (geteuid() == 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= (1u << 20))
        CHECK(flags.find(" lo ") != std::string::npos);
#endif
    // Moves keep the pages; clones get their own, marked the same way.
    const void* where = key.reveal().data();
    Secret moved = std::move(key);
    CHECK(moved.reveal().data() == where);
    Secret copy = moved.clone();
    CHECK(vm_flags_of(copy.reveal().data()).find(" dd ") != std::string::npos);
    CHECK(copy.reveal_text() == moved.reveal_text());
    // Empty secrets map nothing.
    CHECK(Secret(0).reveal().data() == nullptr);
}
