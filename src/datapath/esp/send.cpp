// The tx pipeline: tun -> (TSO split) -> ESP seal in place -> sendmmsg / UDP GSO.
#include <algorithm>

#include "protocols/esp/gp_probe.h"
#include "src/datapath/esp/esp_pipeline.h"
#include "src/datapath/too_big.h"

namespace espvpn::datapath {

namespace {
constexpr unsigned kMaxProbesPerWake = 4;
}  // namespace

EspTxPipeline::EspTxPipeline(io::TunDevice& tun, io::UdpSocket& udp, const EspDatapathOptions& options, EspRxToTx& from_rx)
    : tun_(tun), udp_(udp), options_(options), from_rx_(from_rx),
      batch_({.slots = options.tx_batch,
              .capacity = std::max({options.max_inner_size, options.tun_mtu, kGpProbeMaxSize}),
              .headroom = kEspMaxHeadroom,
              .tailroom = kEspMaxTailroom}),
      seal_items_(new EspOutboundSa::Item[options.tx_batch]), seal_slots_(new std::size_t[options.tx_batch]),
      too_big_(options.icmp_too_big_per_second), tun_since_(&tun) {}

void EspTxPipeline::run() {
    for (;;) {
        handle_control();
        if (control.stop.load(std::memory_order_acquire)) return;
        if (!drain_tun()) return;
        // A deferred SA switch may be due by its timeout even when nothing is sent.
        const int timeout = deferred_ ? 100 : -1;
        if (!wait_for_work(control, tun_.fd(), timeout, failure)) return;
    }
}

void EspTxPipeline::handle_control() {
    const bool asked = control.begin_handling();
    take_updates(Clock::now());
    if (asked) send_probes();
}

// Between batches: new SAs from the control plane, a new peer from rx, a due deferred switch.
void EspTxPipeline::take_updates(Clock::time_point now) {
    while (std::unique_ptr<OutboundUpdate> u = sa_updates.take()) {
        if (u->peer_spi && sa_) {
            deferred_ = std::move(u);
            deferred_since_ = now;
        } else {
            deferred_.reset();
            activate(std::move(u->sa));
        }
    }
    if (deferred_ && (from_rx_.last_authentic_spi.load(std::memory_order_relaxed) == *deferred_->peer_spi ||
                      now - deferred_since_ >= options_.deferred_outbound_timeout)) {
        std::unique_ptr<OutboundUpdate> u = std::move(deferred_);
        activate(std::move(u->sa));
    }
    while (std::unique_ptr<io::SocketAddress> peer = from_rx_.peer_updates.take()) {
        udp_.set_peer(*peer);
        have_peer_ = true;
    }
}

void EspTxPipeline::activate(EspOutboundSa sa) {
    sa_.emplace(std::move(sa));
    bump(counters.sa_installs);
    publish_sa_state();
}

void EspTxPipeline::publish_sa_state() {
    counters.spi.store(sa_ ? sa_->spi() : 0, std::memory_order_relaxed);
    counters.next_sequence.store(sa_ ? sa_->next_sequence() : 0, std::memory_order_relaxed);
    counters.needs_rekey.store(sa_ && sa_->needs_rekey(), std::memory_order_relaxed);
}

bool EspTxPipeline::drain_tun() {
    for (;;) {
        Result<std::size_t> got = tun_.read_packets(batch_);
        if (!got) {
            failure.set(got.error().message);
            return false;
        }
        const io::TunCounters& t = tun_.counters();  // the read-side fields are this thread's
        mirror(counters.tun_reads, tun_since_.reads(t));
        mirror(counters.tun_super_packets, tun_since_.super_packets(t));
        mirror(counters.drop_split, tun_since_.split_drops(t));
        if (batch_.size() == 0) return true;
        seal_and_send(false);
        batch_.clear();
        if (control.pending() || deferred_ || options_.learn_peer) {
            handle_control();
            if (control.stop.load(std::memory_order_acquire)) return true;
        }
    }
}

void EspTxPipeline::seal_and_send(bool probes) {
    const std::size_t n = batch_.size();
    std::size_t to_seal = 0;
    std::uint64_t inner_bytes = 0, esp_bytes = 0;
    std::uint64_t no_sa = 0, no_peer = 0, too_big = 0, not_ip = 0, seal_failed = 0, exhausted = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::span<std::uint8_t> pkt = batch_.packet(i);
        inner_bytes += pkt.size();
        if (!sa_) {
            ++no_sa;
            continue;
        }
        if (options_.learn_peer && !have_peer_) {
            ++no_peer;
            continue;
        }
        if (pkt.size() > options_.max_inner_size) {
            ++too_big;
            if (too_big_.answer(tun_, pkt, options_.max_inner_size)) bump(counters.icmp_too_big_sent);
            continue;
        }
        const unsigned version = pkt.empty() ? 0 : pkt[0] >> 4;
        if (version != 4 && version != 6) {
            ++not_ip;
            continue;
        }
        const std::uint8_t next_header = version == 4 ? kEspNextHeaderIpv4 : kEspNextHeaderIpv6;
        seal_items_[to_seal] = EspOutboundSa::Item{batch_.slot(i), batch_.front_room(i), pkt.size(), next_header, {}};
        seal_slots_[to_seal++] = i;
    }
    if (to_seal) sa_->seal_batch({seal_items_.get(), to_seal});
    std::size_t kept = 0;
    for (std::size_t k = 0; k < to_seal; ++k) {
        const EspSealResult& r = seal_items_[k].result;
        const std::size_t i = seal_slots_[k];
        if (!r.ok()) {
            ++(r.status == EspSealStatus::sequence_exhausted ? exhausted : seal_failed);
            continue;
        }
        // The packet now starts headroom() bytes earlier and ends after the ICV.
        (void)batch_.grow_front(i, sa_->headroom());
        batch_.set_length(i, r.packet.size());
        esp_bytes += r.packet.size();
        kept = batch_.keep(i, kept);
    }
    batch_.set_size(kept);
    if (probes) {
        bump(counters.probes_sent, kept);
    } else {
        bump(counters.inner_packets, n);
        bump(counters.inner_bytes, inner_bytes);
    }
    bump(counters.esp_packets, kept);
    bump(counters.esp_bytes, esp_bytes);
    if (no_sa) bump(counters.drop_no_sa, no_sa);
    if (no_peer) bump(counters.drop_no_peer, no_peer);
    if (too_big) bump(counters.drop_too_big, too_big);
    if (not_ip) bump(counters.drop_not_ip, not_ip);
    if (seal_failed) bump(counters.drop_seal_failed, seal_failed);
    if (exhausted) bump(counters.drop_sequence_exhausted, exhausted);
    if (kept) send_all();
    publish_sa_state();
}

// One sendmmsg per batch normally; when the socket is full, wait for room and
// send the rest (back-pressure to the tun) rather than drop at once.
void EspTxPipeline::send_all() {
    (void)send_with_back_pressure(udp_, batch_, control, counters);
    mirror_send_counters(udp_.counters(), counters);  // the send-side fields are this thread's
}

void EspTxPipeline::send_probes() {
    const std::uint32_t wanted = probe_requests.load(std::memory_order_acquire);
    if (!options_.probe.enabled() || !sa_ || wanted == probes_done_) {
        probes_done_ = wanted;
        return;
    }
    const unsigned count = std::min<std::uint32_t>(wanted - probes_done_, kMaxProbesPerWake);
    probes_done_ = wanted;
    batch_.clear();
    const ProbeTarget& p = options_.probe;
    for (unsigned k = 0; k < count; ++k) {
        GpProbe probe = build_gp_probe(batch_.next_room(), {p.source, p.address_size}, p.gateway_address(),
                                       probe_seq_++);
        if (probe.size == 0) break;
        batch_.commit(probe.size);
    }
    seal_and_send(true);
    batch_.clear();
}

}  // namespace espvpn::datapath
