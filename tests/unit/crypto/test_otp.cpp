// HOTP/TOTP against the RFC 4226 and RFC 6238 test vectors, and the --token-secret
// spellings openconnect reads.
#include <doctest/doctest.h>

#include <string>

#include "crypto/otp.h"

using namespace espvpn;

namespace {
std::string text(const Secret& s) { return std::string(s.reveal_text()); }
const Secret key20 = Secret::from_string("12345678901234567890");
}  // namespace

TEST_CASE("HOTP: RFC 4226 appendix D, counters 0-9") {
    const char* expected[] = {"755224", "287082", "359152", "969429", "338314",
                              "254676", "287922", "162583", "399871", "520489"};
    for (std::uint64_t c = 0; c < 10; ++c) CHECK(text(hotp_code(key20, OtpHash::sha1, c)) == expected[c]);
}

TEST_CASE("TOTP: RFC 6238 appendix B, SHA-1/256/512, 8 digits") {
    const Secret key32 = Secret::from_string("12345678901234567890123456789012");
    const Secret key64 = Secret::from_string("1234567890123456789012345678901234567890123456789012345678901234");
    struct Row {
        std::int64_t t;
        const char *sha1, *sha256, *sha512;
    };
    const Row rows[] = {
        {59, "94287082", "46119246", "90693936"},
        {1111111109, "07081804", "68084774", "25091201"},
        {1111111111, "14050471", "67062674", "99943326"},
        {1234567890, "89005924", "91819424", "93441116"},
        {2000000000, "69279037", "90698825", "38618901"},
        {20000000000, "65353130", "77737706", "47863826"},
    };
    for (const auto& r : rows) {
        CAPTURE(r.t);
        CHECK(text(totp_code(key20, OtpHash::sha1, r.t, 30, 8)) == r.sha1);
        CHECK(text(totp_code(key32, OtpHash::sha256, r.t, 30, 8)) == r.sha256);
        CHECK(text(totp_code(key64, OtpHash::sha512, r.t, 30, 8)) == r.sha512);
    }
    // Six digits (what openconnect sends) are the last six of the eight.
    CHECK(text(totp_code(key20, OtpHash::sha1, 59)) == "287082");
}

TEST_CASE("token secrets: base32, 0x hex, raw, hash prefixes, HOTP counter") {
    auto b32 = parse_otp_secret("base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ\n", false);
    REQUIRE(b32);
    CHECK(b32->key.equals(key20));
    CHECK(b32->hash == OtpHash::sha1);
    CHECK(b32->format == OtpSecret::Format::base32);
    auto lower = parse_otp_secret("BASE32:gezdgnbvgy3tqojqgezdgnbvgy3tqojq", false);
    REQUIRE(lower);
    CHECK(lower->key.equals(key20));
    auto hex = parse_otp_secret("0x3132333435363738393031323334353637383930", false);
    REQUIRE(hex);
    CHECK(hex->key.equals(key20));
    auto odd = parse_otp_secret("0x123", false);
    REQUIRE(odd);
    CHECK(odd->key.reveal().size() == 2);
    CHECK(odd->key.reveal()[0] == 0x01);
    CHECK(odd->key.reveal()[1] == 0x23);
    auto raw = parse_otp_secret("12345678901234567890", false);
    REQUIRE(raw);
    CHECK(raw->key.equals(key20));
    CHECK(raw->format == OtpSecret::Format::raw);
    auto s256 = parse_otp_secret("sha256:0x3132", false);
    REQUIRE(s256);
    CHECK(s256->hash == OtpHash::sha256);
    auto s512 = parse_otp_secret("SHA512:base32:GEZA====", false);
    REQUIRE(s512);
    CHECK(s512->hash == OtpHash::sha512);
    CHECK(s512->key.reveal_text() == "12");
    // HOTP: ",N" is the counter; for TOTP the comma is part of a raw key.
    auto h = parse_otp_secret("base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,7\n", true);
    REQUIRE(h);
    CHECK(h->counter == 7);
    CHECK(text(hotp_code(h->key, h->hash, h->counter)) == "162583");
    auto t = parse_otp_secret("abc,7", false);
    REQUIRE(t);
    CHECK(t->key.reveal_text() == "abc,7");
}

TEST_CASE("token secrets: bad input is refused with a reason") {
    CHECK_FALSE(parse_otp_secret("base32:GEZ1", false));       // '1' is not base32
    CHECK_FALSE(parse_otp_secret("base32:GEZDG0", false));     // '0' neither
    CHECK_FALSE(parse_otp_secret("base32:G", false));          // one char is no byte
    CHECK_FALSE(parse_otp_secret("0xzz", false));
    CHECK_FALSE(parse_otp_secret("0x", false));
    CHECK_FALSE(parse_otp_secret("", false));
    CHECK_FALSE(parse_otp_secret("base32:GEZA====,x", true));  // counter not a number
    auto e = parse_otp_secret("0xzz", false);
    CHECK(e.error().message.find("hexadecimal") != std::string::npos);
}

TEST_CASE("HOTP write-back keeps the format and advances the counter") {
    auto h = parse_otp_secret("base32:gezdgnbvgy3tqojqgezdgnbvgy3tqojq,3", true);
    REQUIRE(h);
    h->counter = 4;
    CHECK(text(format_otp_secret(*h)) == "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,4");
    auto x = parse_otp_secret("sha256:0x3132ABff", true);
    REQUIRE(x);
    x->counter = 1;
    CHECK(text(format_otp_secret(*x)) == "sha256:0x3132abff,1");
    auto r = parse_otp_secret("rawkey", true);
    REQUIRE(r);
    CHECK(text(format_otp_secret(*r)) == "rawkey,0");
    auto padded = parse_otp_secret("base32:GEZA", true);  // unpadded in, padded out
    REQUIRE(padded);
    CHECK(text(format_otp_secret(*padded)) == "base32:GEZA====,0");
}
