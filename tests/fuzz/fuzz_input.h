// Helpers shared by the libFuzzer targets: the input as text, and a byte
// reader for targets that take a few control bytes before their payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace espvpn::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// Consumes control bytes from the front of the input; 0 once it is exhausted.
class InputReader {
public:
    InputReader(const std::uint8_t* data, std::size_t size) : rest_(data, size) {}
    std::uint8_t byte() {
        if (rest_.empty()) return 0;
        std::uint8_t b = rest_.front();
        rest_ = rest_.subspan(1);
        return b;
    }
    std::span<const std::uint8_t> take(std::size_t n) {
        n = n < rest_.size() ? n : rest_.size();
        auto out = rest_.first(n);
        rest_ = rest_.subspan(n);
        return out;
    }
    std::span<const std::uint8_t> rest() const { return rest_; }

private:
    std::span<const std::uint8_t> rest_;
};

}  // namespace espvpn::fuzz
