// The DTLS rx pipeline: recvmmsg / UDP GRO -> DTLS open -> type byte -> data to the tun's owner (deliver).
#include "protocols/anyconnect/dtls_framing.h"
#include "src/datapath/dtls/dtls_pipeline.h"

namespace espvpn::datapath {

namespace {
// OC reserves 16 KiB per receive: some servers send records above the MTU. With UDP GRO
// a slot takes a whole coalesced buffer (64 KiB) and the datagrams are views into it, as
// ESP's rx does: no copy out of a separate GRO buffer.
constexpr std::size_t kDatagramCapacity = 65536;
static_assert(kDatagramCapacity >= 16384 + io::kDtlsMaxRecordOverhead);
constexpr std::size_t kTunSlotCapacity = 65535;  // a record, or coalesced TCP segments for one tun write

std::atomic<std::uint64_t>* drop_counter(DtlsRxCounters& c, anyconnect::DtlsRecordDrop why) {
    using anyconnect::DtlsRecordDrop;
    switch (why) {
        case DtlsRecordDrop::none: return nullptr;
        case DtlsRecordDrop::empty: return &c.drop_empty;
        case DtlsRecordDrop::not_ip: return &c.drop_not_ip;
        case DtlsRecordDrop::compressed: return &c.drop_compressed;
        case DtlsRecordDrop::unknown_type: return &c.drop_unknown_type;
    }
    return nullptr;
}
}  // namespace

DtlsRxPipeline::DtlsRxPipeline(io::UdpSocket& udp, io::DtlsChannel& channel,
                               const DtlsDatapathOptions& options, DtlsTxPipeline& tx)
    : deliver_(options.deliver), udp_(udp), channel_(channel), tx_(tx),
      in_({.slots = options.rx_batch, .capacity = kDatagramCapacity, .headroom = 0, .tailroom = 0,
           .views = 3 * options.rx_batch}),
      // Headroom >= the virtio header the tun write prepends.
      out_({.slots = options.rx_batch, .capacity = kTunSlotCapacity, .headroom = 16, .tailroom = 0}),
      linger_(options.rx_linger, options.rx_batch) {}

void DtlsRxPipeline::run() {
    for (;;) {
        control.begin_handling();
        if (control.stop.load(std::memory_order_acquire)) return;
        if (!drain_udp()) return;
        if (!wait_for_work(control, udp_.fd(), -1, failure)) return;
        if (linger_.linger_after_wakeup(Clock::now())) bump(counters.lingers);
    }
}

bool DtlsRxPipeline::drain_udp() {
    for (;;) {
        in_.clear();
        Result<std::size_t> got = udp_.recv_batch(in_);
        if (!got) {
            failure.set(got.error().message);
            return false;
        }
        mirror_receive_counters(udp_.counters(), counters);  // the receive-side fields are this thread's
        if (in_.size() == 0) return true;
        std::uint64_t bytes = 0;
        for (std::size_t i = 0; i < in_.size(); ++i) bytes += in_.length(i);
        bump(counters.udp_datagrams, in_.size());
        bump(counters.udp_bytes, bytes);
        linger_.received(in_.size(), bytes);
        if (!open_and_deliver()) return false;
        if (control.pending() && control.stop.load(std::memory_order_acquire)) return true;
    }
}

bool DtlsRxPipeline::open_and_deliver() {
    for (;;) {
        out_.clear();
        Result<io::DtlsOpenOutcome> opened = channel_.open_batch(in_, out_);
        if (!opened) {
            failure.set(opened.error().message);
            return false;
        }
        if (opened->discarded) bump(counters.drop_discarded, opened->discarded);
        if (opened->peer_closed) peer_closed.store(true, std::memory_order_relaxed);
        if (opened->records) {
            bump(counters.records, opened->records);
            const Clock::time_point now = Clock::now();
            last_rx.set(now);
            if (!deliver(now)) return false;
        }
        if (!opened->more) return true;
    }
}

// Acts on each record by its type; data packets stay at the front of out_
// (type byte stripped) and go to the tun in one coalesced write.
bool DtlsRxPipeline::deliver(Clock::time_point now) {
    using anyconnect::DtlsRecordKind;
    const std::size_t n = out_.size();
    std::size_t kept = 0;
    std::uint64_t bytes = 0;
    bool dpd_echoed = false;
    for (std::size_t i = 0; i < n; ++i) {
        const anyconnect::DtlsRecord r = anyconnect::parse_dtls_record(out_.packet(i));
        switch (r.kind) {
            case DtlsRecordKind::data:
                (void)out_.shrink_front(i, anyconnect::kDtlsPacketHeaderSize);
                bytes += out_.length(i);
                kept = out_.keep(i, kept);
                break;
            case DtlsRecordKind::dpd_request:
                bump(counters.dpd_requests);
                if (tx_.dpd_echoes.post(std::make_unique<DpdEcho>(DpdEcho{{r.payload.begin(), r.payload.end()}}))) {
                    dpd_echoed = true;
                } else {
                    bump(counters.drop_dpd_backlog);
                }
                break;
            case DtlsRecordKind::dpd_response:
                bump(counters.dpd_responses);
                last_dpd_response.set(Clock::now());
                break;
            case DtlsRecordKind::keepalive: bump(counters.keepalives); break;
            case DtlsRecordKind::disconnect:
                bump(counters.disconnects);
                peer_disconnected.store(true, std::memory_order_relaxed);
                break;
            case DtlsRecordKind::dropped:
                if (std::atomic<std::uint64_t>* c = drop_counter(counters, r.drop)) bump(*c);
                break;
        }
    }
    if (dpd_echoed) tx_.control.notify();
    out_.set_size(kept);
    if (kept == 0) return true;
    bump(counters.inner_packets, kept);
    bump(counters.inner_bytes, bytes);
    linger_.delivered(now);
    deliver_(out_);
    return true;
}

}  // namespace espvpn::datapath
