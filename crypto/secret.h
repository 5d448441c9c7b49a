// Secret: the only type that holds passwords, cookies, OTPs and keys.
// It zeroes its bytes when destroyed or overwritten, never prints its content
// (streams show "<redacted>"), and is not implicitly copyable, so a secret
// cannot be duplicated into a log line or a std::string by accident.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string_view>

#include "protocols/base/result.h"

namespace espvpn {

class Secret {
public:
    Secret() = default;
    explicit Secret(std::size_t size);  // zero-filled
    Secret(std::span<const std::uint8_t> bytes);
    static Secret from_string(std::string_view text);
    // Hex digits (either case), optionally with a "0x" prefix, as a GlobalProtect
    // getconfig reply carries ESP keys.
    static Result<Secret> from_hex(std::string_view hex);

    Secret(Secret&& other) noexcept;
    Secret& operator=(Secret&& other) noexcept;
    Secret(const Secret&) = delete;
    Secret& operator=(const Secret&) = delete;
    ~Secret();

    Secret clone() const;

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    // Deliberately named: every read of the plaintext is easy to find with grep.
    std::span<const std::uint8_t> reveal() const { return {data_.get(), size_}; }
    std::span<std::uint8_t> reveal_mutable() { return {data_.get(), size_}; }
    std::string_view reveal_text() const {
        return {reinterpret_cast<const char*>(data_.get()), size_};
    }

    // Constant-time comparison (the length is not secret).
    bool equals(const Secret& other) const;

    void clear();

private:
    std::unique_ptr<std::uint8_t[]> data_;
    std::size_t size_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Secret& secret);

// Zero memory in a way the compiler may not optimise away.
void secure_zero(void* p, std::size_t n);

}  // namespace espvpn
