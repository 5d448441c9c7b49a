// The tun's own counters (reads, super-packets, split drops, write errors) are
// totals since the device opened; every pipeline reports them from its own
// start, so a pipeline's counters are what that pipeline did (sums over
// restarts stay right, and ESP after an HTTPS spell does not count HTTPS's reads).
#pragma once

#include <cstdint>

#include "src/io/tun_device.h"

namespace espvpn::datapath {

class TunCountsSince {
public:
    explicit TunCountsSince(const io::TunDevice* tun) : start_(tun ? tun->counters() : io::TunCounters{}) {}
    std::uint64_t reads(const io::TunCounters& now) const { return now.reads - start_.reads; }
    std::uint64_t super_packets(const io::TunCounters& now) const { return now.super_packets - start_.super_packets; }
    std::uint64_t split_drops(const io::TunCounters& now) const {
        return now.split_drop_total() - start_.split_drop_total();
    }
    std::uint64_t write_errors(const io::TunCounters& now) const { return now.write_errors - start_.write_errors; }

private:
    io::TunCounters start_;
};

}  // namespace espvpn::datapath
