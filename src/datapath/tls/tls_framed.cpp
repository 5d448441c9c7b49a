#include "src/datapath/tls/tls_framed.h"

#include <poll.h>

#include <algorithm>

namespace espvpn::datapath {

namespace {
constexpr int kStalledPollMs = 100;             // wake to check stop / the stall limit
constexpr std::size_t kRxSlotCapacity = 65535;  // a frame, or coalesced TCP segments for one tun write
constexpr std::size_t kRxHeadroom = 16;         // the tun writer's virtio_net_hdr
}  // namespace

TlsFrameSender::TlsFrameSender(io::TunDevice& tun, gnutls_session_t session, io::TlsRecordBatcher& batcher,
                               ControlChannel& control, TlsTunnelCounters& counters, const TlsFramedOptions& o,
                               std::size_t header_size)
    : tun_(tun), session_(session), batcher_(batcher), control_(control), counters_(counters), options_(o),
      header_size_(header_size),
      batch_(io::PacketBatchShape{o.tx_batch, std::max(o.max_inner_size, o.tun_mtu), header_size, 0}),
      too_big_(o.icmp_too_big_per_second), tun_since_(&tun) {}

Result<std::size_t> TlsFrameSender::read_tun() {
    batch_.clear();
    Result<std::size_t> got = tun_.read_packets(batch_);
    // The read-side fields are this thread's.
    const io::TunCounters& t = tun_.counters();
    mirror(counters_.tx_tun_reads, tun_since_.reads(t));
    mirror(counters_.tx_super_packets, tun_since_.super_packets(t));
    mirror(counters_.drop_tx_split, tun_since_.split_drops(t));
    return got;
}

Status TlsFrameSender::seal(std::span<const std::uint8_t> frame) {
    std::size_t off = 0;
    while (off < frame.size()) {
        const ssize_t n = gnutls_record_send(session_, frame.data() + off, frame.size() - off);
        if (n > 0) {
            off += static_cast<std::size_t>(n);
            bump(counters_.tx_tls_records);
            bump(counters_.tx_tls_bytes, static_cast<std::uint64_t>(n));
            continue;
        }
        if (n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED)
            return make_error(std::string("TLS send: ") + gnutls_strerror(static_cast<int>(n)));
        // The batcher is full: send it, then repeat the same call (GnuTLS keeps the record).
        if (Status st = flush(); !st) return st;
    }
    return {};
}

Status TlsFrameSender::flush() {
    using Flush = io::TlsRecordBatcher::Flush;
    const auto outcome = batcher_.flush([&](std::chrono::steady_clock::duration stalled) {
        if (control_.stop.load(std::memory_order_acquire)) return Flush::stopped;
        if (stalled > options_.write_stall_limit) return Flush::stalled;
        bump(counters_.tx_write_waits);
        pollfd fds[2] = {{batcher_.fd(), POLLOUT, 0}, {control_.fd(), POLLIN, 0}};
        (void)::poll(fds, 2, kStalledPollMs);
        if (fds[1].revents & POLLIN) control_.drain();  // stop is checked above; other requests wait
        return Flush::sent;
    });
    if (outcome.ok()) return {};
    return make_error(outcome.describe());
}

TlsFrameReceiver::TlsFrameReceiver(io::TunDevice& tun, io::TlsRecordBatcher& batcher, TlsTunnelCounters& counters,
                                   const TlsFramedOptions& o, std::mutex* tun_lock)
    : tun_(tun), batcher_(batcher), counters_(counters), tun_lock_(tun_lock),
      batch_(io::PacketBatchShape{o.rx_batch, kRxSlotCapacity, kRxHeadroom + kMaxFront, 0}), record_(new std::uint8_t[kRecordSize]),
      tun_since_(&tun) {}

ssize_t TlsFrameReceiver::read_record() {
    const ssize_t n = batcher_.recv(record_.get(), kRecordSize);
    if (n > 0) {
        bump(counters_.rx_tls_reads);
        bump(counters_.rx_tls_bytes, static_cast<std::uint64_t>(n));
    }
    return n;
}

ssize_t TlsFrameReceiver::read_record_into_slot(std::size_t front) {
    if (front > kMaxFront) return GNUTLS_E_INVALID_REQUEST;
    if (batch_.full())
        (void)deliver();  // a failed tun write is counted (drop_rx_tun_write); the records go on
    std::span<std::uint8_t> room = batch_.next_room();
    landing_ = room.data() - front;  // in the slot's headroom: the frame header, overwritten later
    const ssize_t n = batcher_.recv(landing_, std::min(room.size() + front, kRecordSize));
    if (n > 0) {
        bump(counters_.rx_tls_reads);
        bump(counters_.rx_tls_bytes, static_cast<std::uint64_t>(n));
    }
    return n;
}

void TlsFrameReceiver::commit_landed(std::size_t payload_len) {
    batch_.commit(payload_len);
    bump(counters_.rx_bytes, payload_len);
}

std::span<const std::uint8_t> TlsFrameReceiver::landed_to_record(std::size_t n) {
    std::memcpy(record_.get(), landing_, n);
    return {record_.get(), n};
}

Status TlsFrameReceiver::add_packet(std::span<const std::uint8_t> packet) {
    if (batch_.full())
        if (Status st = deliver(); !st) return st;
    std::span<std::uint8_t> room = batch_.next_room();
    if (packet.size() > room.size()) {
        bump(counters_.drop_rx_too_big);
        return {};
    }
    std::memcpy(room.data(), packet.data(), packet.size());
    batch_.commit(packet.size());
    bump(counters_.rx_bytes, packet.size());
    return {};
}

Status TlsFrameReceiver::deliver() {
    if (batch_.size() == 0) return {};
    const std::size_t packets = batch_.size();
    Result<std::size_t> writes = write_tun(batch_);
    batch_.clear();
    if (!writes) return writes.error();
    bump(counters_.rx_packets, packets);
    bump(counters_.rx_tun_writes, *writes);
    return {};
}

Result<std::size_t> TlsFrameReceiver::write_tun(io::PacketBatch& batch) {
    std::unique_lock<std::mutex> lock;
    if (tun_lock_) lock = std::unique_lock<std::mutex>(*tun_lock_);
    Result<std::size_t> writes = tun_.write_packets(batch);
    mirror(counters_.drop_rx_tun_write, tun_since_.write_errors(tun_.counters()));
    return writes;
}

}  // namespace espvpn::datapath
