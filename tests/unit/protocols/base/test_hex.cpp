#include <doctest/doctest.h>

#include <vector>

#include "protocols/base/hex.h"

using namespace espvpn;

TEST_CASE("hex: two lower-case digits per byte, SPIs as 0x + 8 digits, digit values of either case") {
    CHECK(hex_encode(std::vector<std::uint8_t>{0x00, 0xab, 0xff}) == "00abff");
    CHECK(hex_encode({}) == "");
    std::string out = "%";
    append_hex(out, std::uint8_t{0x2f});
    CHECK(out == "%2f");
    CHECK(hex32(0) == "0x00000000");
    CHECK(hex32(0xa5a5a5a5u) == "0xa5a5a5a5");
    CHECK(hex32(0x1bfb360cu) == "0x1bfb360c");
    CHECK(hex_digit_value('0') == 0);
    CHECK(hex_digit_value('9') == 9);
    CHECK(hex_digit_value('a') == 10);
    CHECK(hex_digit_value('F') == 15);
    CHECK(hex_digit_value('g') == -1);
    CHECK(hex_digit_value('/') == -1);
}
