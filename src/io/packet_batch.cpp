#include "src/io/packet_batch.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <utility>

namespace espvpn::io {

namespace {
constexpr std::size_t kSlotAlign = 64;  // cache line: slots never share one
}

void PacketBatch::FreeStorage::operator()(std::uint8_t* p) const { std::free(p); }

PacketBatch::PacketBatch(const PacketBatchShape& shape) : shape_(shape) {
    if (shape.slots == 0 || shape.capacity == 0)
        throw std::invalid_argument("PacketBatch: slots and capacity must be non-zero");
    std::size_t raw = shape.headroom + shape.capacity + shape.tailroom;
    if (raw > UINT32_MAX / 2) throw std::invalid_argument("PacketBatch: slot too large");
    slot_size_ = (raw + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
    storage_.reset(static_cast<std::uint8_t*>(std::aligned_alloc(kSlotAlign, slot_size_ * shape.slots)));
    if (!storage_) throw std::bad_alloc();
    meta_.reset(new Meta[entries()]);
    for (std::size_t i = 0; i < entries(); ++i) {
        meta_[i].slot = static_cast<std::uint32_t>(i % shape.slots);
        reset_slot(i);
    }
}

void PacketBatch::clear() {
    // Views may have left entries pointing into any slot: give entry i its own
    // slot i back (swaps alone only permute them, which is fine as it is).
    const std::size_t to_reset = shape_.views ? shape_.slots : std::min(used_, shape_.slots);
    for (std::size_t i = 0; i < to_reset; ++i) {
        if (shape_.views) meta_[i].slot = static_cast<std::uint32_t>(i);
        reset_slot(i);
    }
    used_ = 0;
}

bool PacketBatch::add_view(std::size_t slot, std::size_t offset, std::size_t length, std::size_t front_room) {
    if (slot >= shape_.slots || front_room > offset || offset + length > slot_size_)
        throw std::logic_error("PacketBatch::add_view outside the slot");
    if (views_full()) return false;
    Meta& m = meta_[used_++];
    m.slot = static_cast<std::uint32_t>(slot);
    m.offset = static_cast<std::uint32_t>(offset);
    m.length = static_cast<std::uint32_t>(length);
    m.low = static_cast<std::uint32_t>(offset - front_room);
    m.high = static_cast<std::uint32_t>(offset + length);
    return true;
}

std::span<std::uint8_t> PacketBatch::storage(std::size_t s) {
    if (s >= shape_.slots) throw std::logic_error("PacketBatch::storage beyond slots");
    return {storage_.get() + s * slot_size_, slot_size_};
}

std::span<std::uint8_t> PacketBatch::next_room() {
    if (full()) return {};
    reset_slot(used_);
    return {slot_base(used_) + shape_.headroom, shape_.capacity};
}

void PacketBatch::commit(std::size_t length) {
    if (full() || length > shape_.capacity) throw std::logic_error("PacketBatch::commit beyond slot");
    meta_[used_].length = static_cast<std::uint32_t>(length);
    ++used_;
}

void PacketBatch::set_size(std::size_t n) {
    if (n > entries()) throw std::logic_error("PacketBatch::set_size beyond slots");
    used_ = n;
}

std::span<std::uint8_t> PacketBatch::packet(std::size_t i) {
    return {slot_base(i) + meta_[i].offset, meta_[i].length};
}

std::span<const std::uint8_t> PacketBatch::packet(std::size_t i) const {
    return {slot_base(i) + meta_[i].offset, meta_[i].length};
}

void PacketBatch::set_length(std::size_t i, std::size_t length) {
    if (meta_[i].offset + length > meta_[i].high) throw std::logic_error("PacketBatch::set_length beyond slot");
    meta_[i].length = static_cast<std::uint32_t>(length);
}

void PacketBatch::reset_slot(std::size_t i) {
    meta_[i].offset = static_cast<std::uint32_t>(shape_.headroom);
    meta_[i].length = 0;
    meta_[i].low = 0;
    meta_[i].high = static_cast<std::uint32_t>(slot_size_);
}

std::size_t PacketBatch::back_room(std::size_t i) const {
    return meta_[i].high - meta_[i].offset - meta_[i].length;
}

bool PacketBatch::grow_front(std::size_t i, std::size_t n) {
    if (n > front_room(i)) return false;
    meta_[i].offset -= static_cast<std::uint32_t>(n);
    meta_[i].length += static_cast<std::uint32_t>(n);
    return true;
}

bool PacketBatch::shrink_front(std::size_t i, std::size_t n) {
    if (n > meta_[i].length) return false;
    meta_[i].offset += static_cast<std::uint32_t>(n);
    meta_[i].length -= static_cast<std::uint32_t>(n);
    return true;
}

bool PacketBatch::grow_back(std::size_t i, std::size_t n) {
    if (n > back_room(i)) return false;
    meta_[i].length += static_cast<std::uint32_t>(n);
    return true;
}

void PacketBatch::swap_packets(std::size_t i, std::size_t j) { std::swap(meta_[i], meta_[j]); }

std::span<std::uint8_t> PacketBatch::slot(std::size_t i) {
    return {slot_base(i), slot_size_};
}

}  // namespace espvpn::io
