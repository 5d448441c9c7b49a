// Internet checksum (RFC 1071) in native byte order: summing 16-bit words as
// the machine reads them and storing the folded result the same way gives the
// right bytes on the wire on either endianness. Chunks must start at even
// offsets of the checksummed range (all headers here are multiples of 4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace espvpn::io::checksum {

// From this many bytes on, add() and copy_and_add() take 32 bytes a step with AVX2 where
// the CPU has it (src/io/checksum.cpp); below it, and on other CPUs, the loops here.
inline constexpr std::size_t kWideFrom = 128;
std::uint64_t add_wide(std::uint64_t acc, const std::uint8_t* p, std::size_t n);
std::uint64_t copy_and_add_wide(std::uint8_t* dst, const std::uint8_t* src, std::size_t n, std::uint64_t acc);

// The portable loop (also the reference the wide one is tested against).
inline std::uint64_t add_narrow(std::uint64_t acc, std::span<const std::uint8_t> bytes) {
    const std::uint8_t* p = bytes.data();
    std::size_t n = bytes.size();
    while (n >= 8) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        acc += v;
        acc += (acc < v);  // end-around carry keeps it a ones' complement sum
        p += 8;
        n -= 8;
    }
    std::uint64_t tail = 0;
    while (n >= 2) {
        std::uint16_t v;
        std::memcpy(&v, p, 2);
        tail += v;
        p += 2;
        n -= 2;
    }
    if (n) {
        const std::uint8_t last[2] = {p[0], 0};
        std::uint16_t v;
        std::memcpy(&v, last, 2);
        tail += v;
    }
    acc += tail;
    acc += (acc < tail);
    return acc;
}

inline std::uint64_t add(std::uint64_t acc, std::span<const std::uint8_t> bytes) {
    if (bytes.size() >= kWideFrom) return add_wide(acc, bytes.data(), bytes.size());
    return add_narrow(acc, bytes);
}

// Copies n bytes from src to dst and adds them to acc in the same pass (the
// TSO split's payload copy: the data is read once, not once to copy and once
// to sum). 32-bit halves go to two accumulators, so no carry chain serialises
// the loop; 64 KiB of input cannot overflow them.
inline std::uint64_t copy_and_add_narrow(std::uint8_t* dst, const std::uint8_t* src, std::size_t n,
                                         std::uint64_t acc) {
    std::uint64_t lo = 0, hi = 0;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t v;
        std::memcpy(&v, src + i, 8);
        std::memcpy(dst + i, &v, 8);
        lo += v & 0xffffffffu;
        hi += v >> 32;
    }
    if (i < n) {
        std::memcpy(dst + i, src + i, n - i);
        acc = add_narrow(acc, {src + i, n - i});
    }
    const std::uint64_t halves = (lo & 0xffffffffu) + (lo >> 32) + (hi & 0xffffffffu) + (hi >> 32);
    acc += halves;
    acc += (acc < halves);
    return acc;
}

inline std::uint64_t copy_and_add(std::uint8_t* dst, const std::uint8_t* src, std::size_t n, std::uint64_t acc) {
    if (n >= kWideFrom) return copy_and_add_wide(dst, src, n, acc);
    return copy_and_add_narrow(dst, src, n, acc);
}

// Folds to 16 bits, not complemented (the form a partial/pseudo-header sum takes).
inline std::uint16_t fold(std::uint64_t acc) {
    acc = (acc & 0xffffffffu) + (acc >> 32);
    acc = (acc & 0xffffffffu) + (acc >> 32);
    acc = (acc & 0xffffu) + (acc >> 16);
    acc = (acc & 0xffffu) + (acc >> 16);
    acc = (acc & 0xffffu) + (acc >> 16);
    return static_cast<std::uint16_t>(acc);
}

// The TCP/UDP pseudo-header sum: addresses as they sit in the IP header.
inline std::uint64_t pseudo_header(std::span<const std::uint8_t> src, std::span<const std::uint8_t> dst,
                                   std::uint8_t protocol, std::uint32_t l4_length) {
    std::uint64_t acc = add(add(0, src), dst);
    const std::uint8_t tail[8] = {0,
                                  0,
                                  0,
                                  protocol,
                                  static_cast<std::uint8_t>(l4_length >> 24),
                                  static_cast<std::uint8_t>(l4_length >> 16),
                                  static_cast<std::uint8_t>(l4_length >> 8),
                                  static_cast<std::uint8_t>(l4_length)};
    return add(acc, tail);
}

// Stores a 16-bit value already in native checksum order.
inline void store(std::uint8_t* at, std::uint16_t value) { std::memcpy(at, &value, 2); }

}  // namespace espvpn::io::checksum
