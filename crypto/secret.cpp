#include "crypto/secret.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <ostream>
#include <utility>

#include "protocols/base/hex.h"

namespace espvpn {

void secure_zero(void* p, std::size_t n) {
    if (p && n) explicit_bzero(p, n);
}

namespace {

std::atomic<void (*)(int)> g_lock_refused_hook{nullptr};
std::atomic<bool> g_lock_refused{false};

std::size_t page_size() {
    static const std::size_t size = [] {
        long n = ::sysconf(_SC_PAGESIZE);
        return n > 0 ? static_cast<std::size_t>(n) : std::size_t{4096};
    }();
    return size;
}

// Zero-filled pages of their own for `size` bytes: out of core dumps, locked
// when the limit allows (the first refusal goes to the hook, once).
std::uint8_t* map_secret_pages(std::size_t size, std::size_t& mapped) {
    const std::size_t page = page_size();
    mapped = (size + page - 1) / page * page;
    void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    (void)::madvise(p, mapped, MADV_DONTDUMP);
    if (::mlock(p, mapped) != 0) {
        const int error = errno;
        if (!g_lock_refused.exchange(true))
            if (auto hook = g_lock_refused_hook.load()) hook(error);
    }
    return static_cast<std::uint8_t*>(p);
}

}  // namespace

void set_secret_lock_refused_hook(void (*hook)(int error)) { g_lock_refused_hook.store(hook); }

Secret::Secret(std::size_t size) : size_(size) {
    if (size) data_ = map_secret_pages(size, mapped_);
}

Secret::Secret(std::span<const std::uint8_t> bytes) : Secret(bytes.size()) {
    if (!bytes.empty()) std::memcpy(data_, bytes.data(), bytes.size());
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

Secret::Secret(Secret&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

Secret& Secret::operator=(Secret&& other) noexcept {
    if (this != &other) {
        clear();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, 0);
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
    if (data_) {
        secure_zero(data_, size_);
        ::munmap(data_, mapped_);  // unlocks too
    }
    data_ = nullptr;
    size_ = mapped_ = 0;
}

std::ostream& operator<<(std::ostream& os, const Secret&) { return os << "<redacted>"; }

}  // namespace espvpn
