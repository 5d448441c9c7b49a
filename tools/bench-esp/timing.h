// Throughput measurement: run an operation over a buffer until a budget of this thread's
// CPU time is spent; report Gbit/s and cycles per byte (CPU time x TSC frequency).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace espvpn::bench {

struct Throughput {
    double gbit_per_s = 0;
    double cycles_per_byte = 0;
};

// TSC ticks per second, calibrated against the steady clock once.
double tsc_hz();

// op(i) processes `bytes` bytes. It runs in `rounds` rounds of about `seconds` each and
// the best round counts: other load on a shared machine only ever slows a round down.
Throughput measure(std::size_t bytes, double seconds, const std::function<void(std::uint64_t)>& op,
                   int rounds = 3);

}  // namespace espvpn::bench
