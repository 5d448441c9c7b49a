// Secret: the only type that holds passwords, cookies, OTPs and keys.
// It zeroes its bytes when destroyed or overwritten, never prints its content
// (streams show "<redacted>"), and is not implicitly copyable, so a secret
// cannot be duplicated into a log line or a std::string by accident.
// Its bytes live in pages of their own, left out of core dumps (MADV_DONTDUMP)
// and locked in memory (mlock: never swapped) where RLIMIT_MEMLOCK allows; when
// it does not, the pages are still kept out of dumps, and the hook set with
// set_secret_lock_refused_hook() hears about it once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
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
    std::span<const std::uint8_t> reveal() const { return {data_, size_}; }
    std::span<std::uint8_t> reveal_mutable() { return {data_, size_}; }
    std::string_view reveal_text() const {
        return {reinterpret_cast<const char*>(data_), size_};
    }

    // Constant-time comparison (the length is not secret).
    bool equals(const Secret& other) const;

    void clear();

private:
    std::uint8_t* data_ = nullptr;  // pages of its own (mapped_ bytes), or null when empty
    std::size_t size_ = 0;
    std::size_t mapped_ = 0;
};

// Called once, at the first Secret whose pages mlock refused (errno), so that
// a program can say so (crypto/ has no log); nullptr: nobody is told.
void set_secret_lock_refused_hook(void (*hook)(int error));

std::ostream& operator<<(std::ostream& os, const Secret& secret);

// Zero memory in a way the compiler may not optimise away.
void secure_zero(void* p, std::size_t n);

}  // namespace espvpn
