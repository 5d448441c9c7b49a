#include "crypto/replay_window.h"

namespace espvpn {

std::string_view describe(ReplayVerdict v) {
    switch (v) {
        case ReplayVerdict::fresh: return "fresh";
        case ReplayVerdict::duplicate: return "sequence number already seen";
        case ReplayVerdict::too_old: return "sequence number behind the replay window";
    }
    return "unknown replay verdict";
}

static std::uint64_t bit_of(std::uint64_t seq) { return std::uint64_t{1} << (seq & 63); }
static std::uint32_t word_of(std::uint64_t seq) {
    return static_cast<std::uint32_t>(seq >> 6) & (ReplayWindow::kWords - 1);
}

ReplayVerdict ReplayWindow::check(std::uint64_t s) const {
    if (s >= top_) return ReplayVerdict::fresh;  // ahead of everything (or first packet)
    if (top_ - 1 - s >= kWindowSize) return ReplayVerdict::too_old;
    return (ring_[word_of(s)] & bit_of(s)) ? ReplayVerdict::duplicate : ReplayVerdict::fresh;
}

void ReplayWindow::accept(std::uint64_t s) {
    if (s >= top_) {
        // Slide: the words between the old newest and the new newest now stand for
        // numbers never seen. A jump of a whole ring or more clears everything.
        const std::uint64_t new_word = s >> 6;
        const std::uint64_t old_word = top_ == 0 ? new_word : (top_ - 1) >> 6;
        const std::uint64_t steps = new_word - old_word;
        if (steps >= kWords) {
            ring_.fill(0);
        } else {
            for (std::uint64_t w = old_word + 1; w <= new_word; ++w) ring_[w & (kWords - 1)] = 0;
        }
        top_ = s + 1;
    }
    ring_[word_of(s)] |= bit_of(s);
}

}  // namespace espvpn
