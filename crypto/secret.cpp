#include "crypto/secret.h"

#include <cstring>
#include <ostream>

#include "protocols/base/hex.h"

namespace espvpn {

void secure_zero(void* p, std::size_t n) {
    if (p && n) explicit_bzero(p, n);
}

Secret::Secret(std::size_t size) : data_(new std::uint8_t[size ? size : 1]()), size_(size) {}

Secret::Secret(std::span<const std::uint8_t> bytes) : Secret(bytes.size()) {
    if (!bytes.empty()) std::memcpy(data_.get(), bytes.data(), bytes.size());
}

Secret Secret::from_string(std::string_view text) {
    return Secret(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

Result<Secret> Secret::from_hex(std::string_view hex) {
    if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
    if (hex.size() % 2 != 0) return make_error("hex key has an odd number of digits");
    Secret out(hex.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
        int hi = hex_digit_value(hex[2 * i]);
        int lo = hex_digit_value(hex[2 * i + 1]);
        // The error names the position, never the content.
        if (hi < 0 || lo < 0)
            return make_error("hex key has a non-hex character at position " +
                              std::to_string(2 * i + (hi < 0 ? 0 : 1)));
        out.data_[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return out;
}

Secret::Secret(Secret&& other) noexcept : data_(std::move(other.data_)), size_(other.size_) {
    other.size_ = 0;
}

Secret& Secret::operator=(Secret&& other) noexcept {
    if (this != &other) {
        clear();
        data_ = std::move(other.data_);
        size_ = other.size_;
        other.size_ = 0;
    }
    return *this;
}

Secret::~Secret() { clear(); }

Secret Secret::clone() const { return Secret(reveal()); }

bool Secret::equals(const Secret& other) const {
    if (size_ != other.size_) return false;
    std::uint8_t diff = 0;
    for (std::size_t i = 0; i < size_; ++i) diff |= data_[i] ^ other.data_[i];
    return diff == 0;
}

void Secret::clear() {
    if (data_) secure_zero(data_.get(), size_);
    data_.reset();
    size_ = 0;
}

std::ostream& operator<<(std::ostream& os, const Secret&) { return os << "<redacted>"; }

}  // namespace espvpn
