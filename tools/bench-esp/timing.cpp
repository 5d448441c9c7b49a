#include "tools/bench-esp/timing.h"

#include <x86intrin.h>

#include <time.h>

#include <chrono>
#include <thread>

namespace espvpn::bench {

// CPU time of this thread: time the scheduler gave to other processes on this shared
// machine is not counted against the code being measured.
static double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double tsc_hz() {
    static const double hz = [] {
        using clock = std::chrono::steady_clock;
        auto t0 = clock::now();
        std::uint64_t c0 = __rdtsc();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::uint64_t c1 = __rdtsc();
        auto t1 = clock::now();
        return static_cast<double>(c1 - c0) / std::chrono::duration<double>(t1 - t0).count();
    }();
    return hz;
}

static Throughput measure_once(std::size_t bytes, double seconds,
                               const std::function<void(std::uint64_t)>& op) {
    std::uint64_t iterations = 0;
    std::uint64_t batch = 16;
    const double t0 = thread_cpu_seconds();
    double elapsed = 0;
    do {
        for (std::uint64_t i = 0; i < batch; ++i) op(iterations + i);
        iterations += batch;
        if (batch < 4096) batch *= 2;
        elapsed = thread_cpu_seconds() - t0;
    } while (elapsed < seconds);
    double total = static_cast<double>(iterations) * static_cast<double>(bytes);
    return {total * 8 / elapsed / 1e9, elapsed * tsc_hz() / total};
}

Throughput measure(std::size_t bytes, double seconds, const std::function<void(std::uint64_t)>& op,
                   int rounds) {
    for (std::uint64_t i = 0; i < 64; ++i) op(i);  // warm caches and lazy init
    Throughput best;
    for (int r = 0; r < rounds; ++r) {
        Throughput t = measure_once(bytes, seconds, op);
        if (t.gbit_per_s > best.gbit_per_s) best = t;
    }
    return best;
}

}  // namespace espvpn::bench
