// Hex text, written once for every layer: key and digest fingerprints, SPIs in
// logs, percent- and \x-escapes. Lower-case digits, as openconnect prints them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace espvpn {

// Two digits per byte appended to `out` ("0a1b...").
void append_hex(std::string& out, std::span<const std::uint8_t> bytes);
inline void append_hex(std::string& out, std::uint8_t byte) { append_hex(out, std::span<const std::uint8_t>(&byte, 1)); }
std::string hex_encode(std::span<const std::uint8_t> bytes);
// An SPI (or any 32-bit value) as logs and --stats-json show it: "0x0000abcd".
std::string hex32(std::uint32_t value);
// The value of one hex digit (either case), -1 for anything else.
int hex_digit_value(char c);

}  // namespace espvpn
