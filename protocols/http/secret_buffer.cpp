#include "protocols/http/secret_buffer.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace espvpn::http {

SecretBuffer::SecretBuffer(SecretBuffer&& other) noexcept
    : data_(other.data_), size_(other.size_), capacity_(other.capacity_) {
    other.data_ = nullptr;
    other.size_ = other.capacity_ = 0;
}

SecretBuffer& SecretBuffer::operator=(SecretBuffer&& other) noexcept {
    if (this != &other) {
        if (data_) {
            secure_zero(data_, capacity_);
            delete[] data_;
        }
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
}

SecretBuffer::~SecretBuffer() {
    if (data_) {
        secure_zero(data_, capacity_);
        delete[] data_;
    }
}

void SecretBuffer::reserve(std::size_t capacity) {
    if (capacity <= capacity_) return;
    auto* bigger = new std::uint8_t[capacity];
    if (size_) std::memcpy(bigger, data_, size_);
    if (data_) {
        secure_zero(data_, capacity_);
        delete[] data_;
    }
    data_ = bigger;
    capacity_ = capacity;
}

void SecretBuffer::append(std::span<const std::uint8_t> bytes) {
    if (bytes.empty()) return;
    if (size_ + bytes.size() > capacity_)
        reserve(std::max<std::size_t>({2 * capacity_, size_ + bytes.size(), 256}));
    std::memcpy(data_ + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
}

void SecretBuffer::append(std::string_view text) {
    append(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

void SecretBuffer::clear() {
    if (data_) secure_zero(data_, size_);
    size_ = 0;
}

Secret SecretBuffer::take_secret() {
    Secret out(bytes());
    clear();
    return out;
}

}  // namespace espvpn::http
