#include "protocols/base/hex.h"

namespace espvpn {

namespace {
constexpr char kDigits[] = "0123456789abcdef";
}

void append_hex(std::string& out, std::span<const std::uint8_t> bytes) {
    for (std::uint8_t b : bytes) {
        out += kDigits[b >> 4];
        out += kDigits[b & 15];
    }
}

std::string hex_encode(std::span<const std::uint8_t> bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    append_hex(out, bytes);
    return out;
}

std::string hex32(std::uint32_t value) {
    std::string out = "0x";
    for (int shift = 28; shift >= 0; shift -= 4) out += kDigits[(value >> shift) & 15];
    return out;
}

int hex_digit_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace espvpn
