// Raw GnuTLS and Nettle primitives, driven the way an ESP transform would drive them,
// so the benchmark can compare the two libraries per primitive and give the ceiling
// an ESP seal can reach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace espvpn::bench {

// One operation over a buffer of `size` bytes, in place.
struct PrimitiveCase {
    std::string name;     // e.g. "AES-128-GCM encrypt"
    std::string library;  // "GnuTLS" or "Nettle"
    std::function<void(std::uint8_t* data, std::size_t size)> run;
};

std::vector<PrimitiveCase> primitive_cases();

// The ceilings the ESP numbers are compared with: the same primitives as the ESP suite,
// called directly on `size` bytes (no header, padding, IV generation or framing).
//   AES-128-GCM       GnuTLS encrypt (the library the transform uses for GCM)
//   AES-128-CBC+SHA1  Nettle CBC encrypt + GnuTLS HMAC-SHA1 (the transform's choices)
void raw_gcm128_encrypt(std::uint8_t* data, std::size_t size);
void raw_cbc128_sha1(std::uint8_t* data, std::size_t size);

}  // namespace espvpn::bench
