// The two halves both TLS-framed tunnels (GP's HTTPS tunnel, AnyConnect's
// CSTP) are built from. Send: tun batches, every packet that may go framed in
// its slot's headroom and sealed as one TLS record (openconnect and the
// official clients send one record per frame), records gathered by a
// TlsRecordBatcher and sent with one send(); an oversized packet is answered
// with ICMP "too big" as ESP and DTLS answer it. Receive: records in, data
// payloads batched and written to the tun (coalesced). The protocols differ
// only in the frame header and in their control frames (TlsFraming, tls_pump.h).
#pragma once

#include <gnutls/gnutls.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "protocols/base/result.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/datapath/too_big.h"
#include "src/datapath/tun_counts.h"
#include "src/io/packet_batch.h"
#include "src/io/tls_record_batcher.h"
#include "src/io/tun_device.h"

namespace espvpn::datapath {

struct TlsFramedOptions {
    // Largest inner packet sent (the tunnel MTU); larger ones are dropped and
    // answered with ICMP frag-needed / packet-too-big (too_big.h).
    std::size_t max_inner_size = 1400;
    std::size_t tun_mtu = 0;     // the tun's MTU if larger (slots must hold what it reads)
    std::size_t tx_batch = 128;  // packets per tun read batch
    std::size_t rx_batch = 64;   // packets per tun write batch
    // The rx thread's wait before reading a download that arrives a few packets at a time
    // (rx_linger.h; the client sets client_rx_linger(), a gateway keeps 0).
    std::chrono::microseconds rx_linger{0};
    // The TCP send buffer full for this long: the connection is dead.
    std::chrono::milliseconds write_stall_limit{20000};
    unsigned icmp_too_big_per_second = 100;
};

// The send half, used by one tx thread (the batcher's sender).
class TlsFrameSender {
public:
    TlsFrameSender(io::TunDevice& tun, gnutls_session_t session, io::TlsRecordBatcher& batcher,
                   ControlChannel& control, TlsTunnelCounters& counters, const TlsFramedOptions& options,
                   std::size_t header_size);

    // Reads what the tun has into batch() (cleared first): packets appended.
    Result<std::size_t> read_tun();
    io::PacketBatch& batch() { return batch_; }

    // Sends batch(): each packet that may go gets header_size bytes in front,
    // written by write_header(framed, inner) (false: not IP, dropped), and
    // leaves as one record.
    template <class WriteHeader>
    Status send_batch(WriteHeader&& write_header);

    // One frame as one record (two only beyond 16 KiB); flushes when the batcher is full.
    Status seal(std::span<const std::uint8_t> frame);
    // Sends what is gathered, waiting for room up to the stall limit (or a stop).
    Status flush();
    bool should_flush() const { return batcher_.nearly_full(); }

private:
    io::TunDevice& tun_;
    gnutls_session_t session_;
    io::TlsRecordBatcher& batcher_;
    ControlChannel& control_;
    TlsTunnelCounters& counters_;
    TlsFramedOptions options_;
    std::size_t header_size_;
    io::PacketBatch batch_;
    TooBigResponder too_big_;
    TunCountsSince tun_since_;
};

// The receive half, used by one rx thread.
class TlsFrameReceiver {
public:
    static constexpr std::size_t kRecordSize = 16384 + 2048;  // one TLS record's plaintext, and slack
    static constexpr std::size_t kMaxFront = 16;              // the largest frame header read into a slot
    // `tun_lock`: taken around tun writes when another thread writes the tun too (may be null).
    // Records come through `batcher`, which opens them itself when it may (open_records()).
    TlsFrameReceiver(io::TunDevice& tun, io::TlsRecordBatcher& batcher, TlsTunnelCounters& counters,
                     const TlsFramedOptions& options, std::mutex* tun_lock);

    // One record (the batcher's recv(), gnutls_record_recv's contract): > 0 is the
    // size of record(); else GnuTLS's code.
    ssize_t read_record();
    std::span<const std::uint8_t> record(std::size_t n) const { return {record_.get(), n}; }
    // The same, the plaintext landing `front` bytes (a frame header) before the start of
    // the tun batch's next slot (the batch goes to the tun first when full); landed(n) is it.
    ssize_t read_record_into_slot(std::size_t front);
    std::span<const std::uint8_t> landed(std::size_t n) const { return {landing_, n}; }
    // The landed frame's payload, where it lies, is the batch's next packet.
    void commit_landed(std::size_t payload_len);
    // The landed bytes copied to record() (for a decoder that may keep pointing at them).
    std::span<const std::uint8_t> landed_to_record(std::size_t n);

    // A data packet into the batch (the batch goes to the tun first when full).
    Status add_packet(std::span<const std::uint8_t> packet);
    // Writes the batch to the tun (coalesced).
    Status deliver();
    // Any batch to the tun under tun_lock (AnyConnect: DTLS's packets too).
    Result<std::size_t> write_tun(io::PacketBatch& batch);

private:
    io::TunDevice& tun_;
    io::TlsRecordBatcher& batcher_;
    TlsTunnelCounters& counters_;
    std::mutex* tun_lock_;
    io::PacketBatch batch_;
    std::unique_ptr<std::uint8_t[]> record_;
    std::uint8_t* landing_ = nullptr;
    TunCountsSince tun_since_;
};

template <class WriteHeader>
Status TlsFrameSender::send_batch(WriteHeader&& write_header) {
    std::uint64_t packets = 0, bytes = 0, too_big = 0, not_ip = 0;
    Status st;
    for (std::size_t i = 0; i < batch_.size() && st; ++i) {
        std::span<const std::uint8_t> pkt = batch_.packet(i);
        if (pkt.size() > options_.max_inner_size) {
            ++too_big;
            if (too_big_.answer(tun_, pkt, options_.max_inner_size)) bump(counters_.tx_icmp_too_big_sent);
            continue;
        }
        const std::size_t len = pkt.size();
        const unsigned version = pkt.empty() ? 0 : pkt[0] >> 4;
        if ((version != 4 && version != 6) || !batch_.grow_front(i, header_size_)) {
            ++not_ip;
            continue;
        }
        std::span<std::uint8_t> framed = batch_.packet(i);
        if (!write_header(framed, framed.subspan(header_size_))) {
            ++not_ip;
            continue;
        }
        st = seal(framed);
        if (!st) break;
        ++packets;
        bytes += len;
        if (should_flush()) st = flush();
    }
    bump(counters_.tx_packets, packets);
    bump(counters_.tx_bytes, bytes);
    if (too_big) bump(counters_.drop_tx_too_big, too_big);
    if (not_ip) bump(counters_.drop_tx_not_ip, not_ip);
    return st;
}

}  // namespace espvpn::datapath
