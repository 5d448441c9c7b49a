// TunDevice: a Linux tun interface read and written in batches.
//
// With offloads on (IFF_VNET_HDR + TUNSETOFFLOAD TSO/USO), one read returns a
// super-packet of up to 64 KiB with a virtio_net_hdr; read_packets splits it
// into MTU-sized packets. write_packets coalesces a batch of TCP (and, with
// USO, UDP) segments into super-packets before writing them. Without offloads
// (refused by the kernel, or turned off) it is one packet per read/write.
// Addresses and routes added through it are removed again when it closes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "src/io/offload.h"
#include "src/io/packet_batch.h"
#include "src/io/rtnetlink.h"

namespace espvpn::io {

struct TunOptions {
    std::string name;        // empty: the kernel picks tunN; an existing persistent tun is attached to
    bool offload = true;     // ask for vnet headers + TSO (+ USO where the kernel has it)
    bool allow_uso = true;
    // The kernel's queue towards our reads, in packets (the tun default is 500).
    // A UDP sender that does not use GSO fills one entry per datagram; when the
    // reading thread is not scheduled for ~5 ms at 1 Gbit/s, 500 overflow (tx_dropped).
    // Raised to at least this (never lowered); 0 leaves the device's value.
    unsigned tx_queue_len = 2048;
};

struct TunOffloads {
    bool vnet_hdr = false;   // reads/writes carry a virtio_net_hdr
    bool csum = false;
    bool tso = false;        // TSO4 + TSO6
    bool uso = false;        // USO4 + USO6
    unsigned flags = 0;      // the TUN_F_* set the kernel accepted
};

struct TunCounters {
    std::uint64_t reads = 0;              // read(2) calls that returned a packet
    std::uint64_t super_packets = 0;      // reads carrying a GSO packet
    std::uint64_t packets_out = 0;        // packets handed to the caller after splitting
    std::uint64_t writes = 0;             // write(2) calls that succeeded
    std::uint64_t packets_in = 0;         // packets given to write_packets
    std::uint64_t write_errors = 0;       // write(2) failures (packet dropped)
    std::array<std::uint64_t, 32> split_drops{};  // by OffloadError
    std::uint64_t split_drop_total() const;
};

class TunDevice {
public:
    static Result<TunDevice> open(const TunOptions& options);
    // A tun another process opened and configured (the broker), passed here as a descriptor:
    // `offloads` as that process negotiated them; set_mtu asks `set_mtu` (the broker holds
    // CAP_NET_ADMIN); closing only closes the descriptor.
    static TunDevice adopt(int fd, std::string name, int ifindex, const TunOffloads& offloads,
                           std::function<Status(unsigned)> set_mtu);
    TunDevice(TunDevice&&) noexcept;
    TunDevice& operator=(TunDevice&&) noexcept;
    ~TunDevice();

    const std::string& name() const { return name_; }
    int fd() const { return fd_; }
    int ifindex() const { return ifindex_; }
    const TunOffloads& offloads() const { return offloads_; }
    const TunCounters& counters() const { return counters_; }

    Status set_mtu(unsigned mtu);
    // How many packets the kernel queues for this process to read (txqueuelen; -Q).
    Status set_tx_queue_len(unsigned packets);
    Status set_up(bool up);
    Status add_address(const InterfaceAddress& prefix);
    Status add_route(const InterfaceAddress& destination, unsigned metric = 0);

    // Waits up to timeout_ms for a packet; false on timeout.
    bool wait_readable(int timeout_ms) const;

    // Reads what is available (never blocks) into `out`, splitting super-packets,
    // until the tun is empty or `out` cannot take the next packet (which stays
    // pending for the next call). Returns packets appended. Malformed packets
    // are dropped and counted. out.capacity() must hold one MTU packet.
    Result<std::size_t> read_packets(PacketBatch& out);

    // Writes every packet of `batch` (coalescing first when offloads are on;
    // then each packet needs kVirtioNetHdrSize bytes of front room). Returns
    // the number of tun writes. Packets the kernel refuses are counted, not fatal.
    Result<std::size_t> write_packets(PacketBatch& batch);

private:
    TunDevice() = default;
    void close();

    int fd_ = -1;
    int ifindex_ = 0;
    std::string name_;
    TunOffloads offloads_;
    TunCounters counters_;
    std::unique_ptr<std::uint8_t[]> read_buf_;  // one super-packet + its virtio header
    std::size_t pending_ = 0;                    // bytes of a read not yet split
    std::unique_ptr<GroCoalescer> gro_;
    std::unique_ptr<RtNetlink> netlink_;
    std::vector<InterfaceAddress> addresses_;
    std::vector<std::pair<InterfaceAddress, unsigned>> routes_;
    std::function<Status(unsigned)> set_mtu_;  // adopted: the owner of the device sets it
};

}  // namespace espvpn::io
