// HandoverQueue: how the control plane hands objects (new SAs, a learned peer
// address) to a datapath thread without a lock and without ever making that
// thread wait. One producer thread, one consumer thread, a fixed number of
// slots; the consumer drains it between batches. Objects are allocated by the
// producer (off the packet path) and freed by whoever holds them last.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>

namespace espvpn::datapath {

template <class T, std::size_t N = 8>
class HandoverQueue {
public:
    HandoverQueue() = default;
    HandoverQueue(const HandoverQueue&) = delete;
    HandoverQueue& operator=(const HandoverQueue&) = delete;
    ~HandoverQueue() {
        while (take()) {
        }
    }

    // Producer side. False when all N slots are still waiting for the consumer
    // (it has not run a batch for N handovers): the object is not queued.
    bool post(std::unique_ptr<T> item) {
        const std::size_t tail = tail_.load(std::memory_order_relaxed);
        if (tail - head_.load(std::memory_order_acquire) == N) return false;
        slots_[tail % N] = item.release();
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    // Consumer side: the oldest waiting object, or null. One relaxed load when empty.
    std::unique_ptr<T> take() {
        const std::size_t head = head_.load(std::memory_order_relaxed);
        if (head == tail_.load(std::memory_order_acquire)) return nullptr;
        std::unique_ptr<T> item(slots_[head % N]);
        slots_[head % N] = nullptr;
        head_.store(head + 1, std::memory_order_release);
        return item;
    }

private:
    std::array<T*, N> slots_{};
    alignas(64) std::atomic<std::size_t> head_{0};  // consumer
    alignas(64) std::atomic<std::size_t> tail_{0};  // producer
};

}  // namespace espvpn::datapath
