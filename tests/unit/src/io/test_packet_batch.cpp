#include <doctest/doctest.h>

#include "src/io/packet_batch.h"

using espvpn::io::PacketBatch;

TEST_CASE("PacketBatch: slots, headroom and tailroom stay inside the slot") {
    PacketBatch b({4, 1500, 24, 48});
    CHECK(b.slots() == 4);
    CHECK(b.size() == 0);
    CHECK(b.slot_size() >= 24 + 1500 + 48);
    CHECK(b.slot_size() % 64 == 0);
    for (int i = 0; i < 4; ++i) {
        auto room = b.next_room();
        REQUIRE(room.size() == 1500);
        room[0] = std::uint8_t(i);
        b.commit(100);
    }
    CHECK(b.full());
    CHECK(b.next_room().empty());
    CHECK(b.packet(2)[0] == 2);
    CHECK(b.front_room(2) == 24);
    CHECK(b.grow_front(2, 24));
    CHECK_FALSE(b.grow_front(2, 1));
    CHECK(b.length(2) == 124);
    CHECK(b.packet(2)[24] == 2);
    std::size_t back = b.back_room(2);
    CHECK(back >= 1400 + 48);
    CHECK(b.grow_back(2, back));
    CHECK_FALSE(b.grow_back(2, 1));
    CHECK(b.shrink_front(2, 24));
    CHECK(b.packet(2)[0] == 2);
    // Slots do not overlap.
    CHECK(b.packet(3).data() >= b.packet(2).data() + b.packet(2).size());
    b.clear();
    CHECK(b.size() == 0);
    CHECK(b.front_room(2) == 24);
    CHECK_THROWS(PacketBatch({0, 1500, 0, 0}));
}
