// Network-order (big-endian) integers in byte buffers, for every layer's headers.
#pragma once

#include <cstdint>

namespace espvpn {

inline std::uint16_t load_be16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
inline std::uint32_t load_be32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
inline std::uint64_t load_be64(const std::uint8_t* p) { return std::uint64_t{load_be32(p)} << 32 | load_be32(p + 4); }
// The low 16 (32, 64) bits of `v`.
inline void store_be16(std::uint8_t* p, std::uint64_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void store_be32(std::uint8_t* p, std::uint64_t v) {
    store_be16(p, v >> 16);
    store_be16(p + 2, v);
}
inline void store_be64(std::uint8_t* p, std::uint64_t v) {
    store_be32(p, v >> 32);
    store_be32(p + 4, v);
}

}  // namespace espvpn
