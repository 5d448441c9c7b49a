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

TEST_CASE("PacketBatch views: bounded by what they were given, and clear() gives slots back") {
    PacketBatch b({2, 4096, 16, 0, 3});
    CHECK(b.entries() == 5);
    auto s1 = b.storage(1);
    for (std::size_t k = 0; k < 100; ++k) s1[16 + k] = std::uint8_t(k);
    // Three datagrams of 30 bytes lying back to back in slot 1, and two in slot 0.
    for (std::size_t k = 0; k < 3; ++k) REQUIRE(b.add_view(1, 16 + 30 * k, 30, k == 0 ? 16 : 0));
    REQUIRE(b.add_view(0, 16, 30, 0));
    REQUIRE(b.add_view(0, 46, 30, 0));
    CHECK(b.views_full());
    CHECK(b.full());
    CHECK(b.next_room().empty());
    CHECK_FALSE(b.add_view(0, 76, 30, 0));
    CHECK(b.size() == 5);
    CHECK(b.packet(1)[0] == 30);
    CHECK(b.packet(1).data() == s1.data() + 46);
    // A view never grows into its neighbours.
    CHECK(b.front_room(1) == 0);
    CHECK_FALSE(b.grow_front(1, 1));
    CHECK_FALSE(b.grow_back(1, 1));
    CHECK(b.front_room(0) == 16);
    CHECK(b.shrink_front(1, 8));
    CHECK(b.front_room(1) == 8);
    CHECK(b.grow_front(1, 8));
    CHECK_THROWS(b.set_length(1, 31));
    b.set_length(1, 20);
    CHECK(b.back_room(1) == 10);
    CHECK_THROWS(b.add_view(2, 16, 30, 0));
    CHECK_THROWS(b.add_view(0, 4, 30, 8));
    b.clear();
    // Owned packets again, each in its own slot.
    for (int i = 0; i < 2; ++i) {
        auto room = b.next_room();
        REQUIRE(room.size() == 4096);
        room[0] = std::uint8_t(100 + i);
        b.commit(10);
    }
    CHECK(b.full());
    CHECK(b.packet(0).data() != b.packet(1).data());
    CHECK(b.packet(0).data() == b.storage(0).data() + 16);
    CHECK(b.packet(1).data() == b.storage(1).data() + 16);
    CHECK(b.back_room(0) >= 4086);
}
