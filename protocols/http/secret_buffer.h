// A growable byte buffer that zeroes every region it gives up (on growth, clear
// and destruction), for HTTP messages that may carry passwords or cookies. Its
// storage is a Secret: pages kept out of core dumps and locked (crypto/secret.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "crypto/secret.h"

namespace espvpn::http {

class SecretBuffer {
public:
    SecretBuffer() = default;
    SecretBuffer(SecretBuffer&& other) noexcept;
    SecretBuffer& operator=(SecretBuffer&& other) noexcept;
    SecretBuffer(const SecretBuffer&) = delete;
    SecretBuffer& operator=(const SecretBuffer&) = delete;
    ~SecretBuffer();

    void append(std::span<const std::uint8_t> bytes);
    void append(std::string_view text);
    void append(const Secret& secret) { append(secret.reveal()); }
    void clear();
    // Growth (which doubles) stops at `bytes` of capacity: a buffer its owner never fills
    // beyond a limit is never given twice that limit (a 16 MiB body limit meant 32 MiB).
    void limit_growth(std::size_t bytes) { growth_limit_ = bytes; }

    std::size_t size() const { return size_; }
    std::size_t capacity() const { return storage_.size(); }
    bool empty() const { return size_ == 0; }
    std::span<const std::uint8_t> bytes() const { return storage_.reveal().first(size_); }
    std::string_view text() const { return storage_.reveal_text().substr(0, size_); }

    // Moves the content into a Secret (one more copy, then this buffer is zeroed).
    Secret take_secret();

private:
    void reserve(std::size_t capacity);
    Secret storage_;  // its size is the capacity
    std::size_t size_ = 0;
    std::size_t growth_limit_ = SIZE_MAX;
};

}  // namespace espvpn::http
