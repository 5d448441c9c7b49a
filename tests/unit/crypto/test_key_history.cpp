#include <doctest/doctest.h>

#include <array>
#include <cstdint>

#include "crypto/key_history.h"

using espvpn::crypto::KeyHistory;

TEST_CASE("KeyHistory: a key used before is recognised, in any order and either direction") {
    std::array<std::uint8_t, 20> out{}, in{}, later{};  // AES-128-GCM key + salt
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<std::uint8_t>(i);
        in[i] = static_cast<std::uint8_t>(0x80 + i);
        later[i] = static_cast<std::uint8_t>(0x40 + i);
    }
    KeyHistory used;
    CHECK_FALSE(used.seen(out));
    CHECK(used.remember(out));
    CHECK(used.remember(in));
    CHECK(used.seen(out));
    CHECK(used.seen(in));
    CHECK_FALSE(used.seen(later));
    CHECK(used.remember(later));
    // The gateway hands out the first outbound key again, now as the inbound one.
    CHECK_FALSE(used.remember(out));
    CHECK(used.size() == 3);
    // One byte different is another key.
    std::array<std::uint8_t, 20> near = out;
    near[19] ^= 1;
    CHECK_FALSE(used.seen(near));
}
