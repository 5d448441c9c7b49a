// Anti-replay window for an inbound ESP SA (RFC 4303 §3.4.3), kept as a ring of
// 64-bit words (RFC 6479) so that sliding the window never shifts the whole bitmap.
//
// Usage: check before the expensive ICV work, accept only after the ICV verified, so a
// forged packet can neither move the window nor mark a sequence number seen:
//   if (window.check(seq) != ReplayVerdict::fresh) drop;
//   if (!icv_ok) drop;
//   window.accept(seq);
// ESP passes 32-bit sequence numbers (GlobalProtect uses no ESN); DTLS passes its
// 48-bit ones, so the arguments are 64-bit. Sequence number 0 is accepted like any
// other (OpenConnect-style peers start there).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace espvpn {

enum class ReplayVerdict : std::uint8_t {
    fresh,      // not seen, inside or ahead of the window
    duplicate,  // seen before
    too_old,    // behind the window: cannot tell, so refuse
};
std::string_view describe(ReplayVerdict v);

class ReplayWindow {
public:
    static constexpr std::uint32_t kWords = 32;                     // 2048 bits in the ring
    static constexpr std::uint32_t kBits = kWords * 64;
    // The word holding the newest number is partly "future", so one word is not usable.
    static constexpr std::uint32_t kWindowSize = kBits - 64;        // 1984 packets

    ReplayVerdict check(std::uint64_t seq) const;
    // Marks seq seen and slides the window if seq is the newest. Call only after
    // check(seq) == fresh and the packet's ICV verified.
    void accept(std::uint64_t seq);

    // The highest sequence number accepted so far (meaningless before the first).
    std::uint32_t highest() const { return static_cast<std::uint32_t>(top_ - 1); }
    bool empty() const { return top_ == 0; }

private:
    std::uint64_t top_ = 0;  // highest accepted + 1; 0 = nothing accepted yet
    std::array<std::uint64_t, kWords> ring_{};
};

}  // namespace espvpn
