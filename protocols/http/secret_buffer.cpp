#include "protocols/http/secret_buffer.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace espvpn::http {

SecretBuffer::SecretBuffer(SecretBuffer&& other) noexcept
    : storage_(std::move(other.storage_)), size_(std::exchange(other.size_, 0)), growth_limit_(other.growth_limit_) {}

SecretBuffer& SecretBuffer::operator=(SecretBuffer&& other) noexcept {
    if (this != &other) {
        storage_ = std::move(other.storage_);  // the old storage is wiped
        size_ = std::exchange(other.size_, 0);
        growth_limit_ = other.growth_limit_;
    }
    return *this;
}

SecretBuffer::~SecretBuffer() = default;  // Secret wipes its bytes

void SecretBuffer::reserve(std::size_t capacity) {
    if (capacity <= storage_.size()) return;
    Secret bigger(capacity);
    if (size_) std::memcpy(bigger.reveal_mutable().data(), storage_.reveal().data(), size_);
    storage_ = std::move(bigger);  // the smaller one is wiped
}

void SecretBuffer::append(std::span<const std::uint8_t> bytes) {
    if (bytes.empty()) return;
    if (size_ + bytes.size() > storage_.size()) {
        const std::size_t grown = std::min(std::max<std::size_t>(2 * storage_.size(), 256), growth_limit_);
        reserve(std::max(grown, size_ + bytes.size()));
    }
    std::memcpy(storage_.reveal_mutable().data() + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
}

void SecretBuffer::append(std::string_view text) {
    append(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

void SecretBuffer::clear() {
    if (size_) secure_zero(storage_.reveal_mutable().data(), size_);
    size_ = 0;
}

Secret SecretBuffer::take_secret() {
    Secret out(bytes());
    clear();
    return out;
}

}  // namespace espvpn::http
