#include "src/datapath/rx_linger.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>

namespace espvpn::datapath {

std::chrono::microseconds client_rx_linger() {
    const char* v = std::getenv("ESPVPN_RX_LINGER_US");
    if (!v || !*v) return std::chrono::microseconds(50);
    char* end = nullptr;
    const long us = std::strtol(v, &end, 10);
    if (*end != '\0' || us < 0) return std::chrono::microseconds(50);
    return std::chrono::microseconds(std::min(us, 1000L));
}

// The rx threads run with a 1 µs timer slack (pipeline_threads.cpp), so the sleep is the
// wait, not up to 50 µs longer.
bool RxLinger::linger_after_wakeup(Clock::time_point now) {
    const std::chrono::microseconds wait = wait_after_wakeup(now);
    if (wait.count() <= 0) return false;
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(wait);
    const timespec t{static_cast<time_t>(s.count()), static_cast<long>((wait - s).count()) * 1000};
    (void)::clock_nanosleep(CLOCK_MONOTONIC, 0, &t, nullptr);  // EINTR: receive a little early
    return true;
}

}  // namespace espvpn::datapath
