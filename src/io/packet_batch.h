// PacketBatch: a fixed set of packet slots in one preallocated block.
//
// Each slot is [headroom | capacity | tailroom]. A packet lives at a per-slot
// offset/length inside it, so the ESP engine can seal in place (grow the front
// by its header, the back by padding + ICV) and the tun writer can prepend a
// virtio_net_hdr, all without copying or allocating after construction.
//
// A batch may also hold views (shape.views > 0): packets that lie inside a
// slot's storage next to each other, e.g. the datagrams of one UDP GRO buffer
// received straight into a slot. A view can shrink and grow back to the bounds
// it was given, never into its neighbours. Between two clear()s a batch holds
// either its own packets (next_room/commit) or views (add_view), not both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace espvpn::io {

struct PacketBatchShape {
    std::size_t slots = 64;           // packets per batch
    std::size_t capacity = 1500;      // bytes of packet a slot holds at its nominal start
    std::size_t headroom = 32;        // bytes free before the nominal start
    std::size_t tailroom = 64;        // bytes free after capacity
    std::size_t views = 0;            // packet entries beyond `slots` usable by add_view
};

class PacketBatch {
public:
    explicit PacketBatch(const PacketBatchShape& shape);
    PacketBatch(PacketBatch&&) noexcept = default;
    PacketBatch& operator=(PacketBatch&&) noexcept = default;

    const PacketBatchShape& shape() const { return shape_; }
    std::size_t slots() const { return shape_.slots; }
    std::size_t headroom() const { return shape_.headroom; }
    std::size_t capacity() const { return shape_.capacity; }

    // Number of slots in use (packets 0..size()-1).
    std::size_t size() const { return used_; }
    bool full() const { return used_ >= shape_.slots; }
    std::size_t free_slots() const { return full() ? 0 : shape_.slots - used_; }
    void clear();

    // The writable area of the next free slot (capacity bytes at the nominal
    // start); commit(len) makes it packet size(). Returns an empty span when full.
    std::span<std::uint8_t> next_room();
    void commit(std::size_t length);
    // Marks slots [size(), size()+n) as used with lengths already set by set_length.
    void set_size(std::size_t n);

    // Views: packet entries (slots + views of them) that point into slot
    // storage written by someone else (recvmmsg). add_view appends packet
    // size() as bytes [offset, offset+length) of storage slot `slot`, allowed to
    // grow back to `front_room` bytes before offset. False when no entry is left.
    std::size_t entries() const { return shape_.slots + shape_.views; }
    bool views_full() const { return used_ == entries(); }
    bool add_view(std::size_t slot, std::size_t offset, std::size_t length, std::size_t front_room);
    // Storage slot s (headroom through tailroom) as it lies in memory, whatever packets point into it.
    std::span<std::uint8_t> storage(std::size_t s);

    // Packet i as it currently stands.
    std::span<std::uint8_t> packet(std::size_t i);
    std::span<const std::uint8_t> packet(std::size_t i) const;
    std::size_t length(std::size_t i) const { return meta_[i].length; }
    void set_length(std::size_t i, std::size_t length);  // from the current start
    void reset_slot(std::size_t i);                       // back to nominal start, length 0

    // Room around packet i, for in-place header/trailer growth.
    std::size_t front_room(std::size_t i) const { return meta_[i].offset - meta_[i].low; }
    std::size_t back_room(std::size_t i) const;
    // Extend/shrink packet i at the front or back; return false when it would
    // leave the slot (the packet is then unchanged).
    bool grow_front(std::size_t i, std::size_t n);
    bool shrink_front(std::size_t i, std::size_t n);
    bool grow_back(std::size_t i, std::size_t n);

    // Exchanges packets i and j (their slots travel with them; no bytes move),
    // so a pipeline can compact a batch after dropping packets: swap the kept
    // ones to the front, then set_size(kept).
    void swap_packets(std::size_t i, std::size_t j);
    // That compaction's step: packet i, kept, goes to position `kept`; returns the new count kept.
    std::size_t keep(std::size_t i, std::size_t kept) {
        if (kept != i) swap_packets(kept, i);
        return kept + 1;
    }

    // The whole slot, headroom through tailroom.
    std::span<std::uint8_t> slot(std::size_t i);
    std::size_t slot_size() const { return slot_size_; }

private:
    struct Meta {
        std::uint32_t offset;  // from slot start
        std::uint32_t length;
        std::uint32_t slot;    // which storage slot packet i lives in
        std::uint32_t low;     // the packet never starts before this offset
        std::uint32_t high;    // nor ends after this one
    };
    std::uint8_t* slot_base(std::size_t i) const { return storage_.get() + meta_[i].slot * slot_size_; }
    PacketBatchShape shape_;
    std::size_t slot_size_;
    std::size_t used_ = 0;
    struct FreeStorage {
        void operator()(std::uint8_t* p) const;
    };
    std::unique_ptr<std::uint8_t[], FreeStorage> storage_;
    std::unique_ptr<Meta[]> meta_;
};

}  // namespace espvpn::io
