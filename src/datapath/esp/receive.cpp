// The rx pipeline: recvmmsg / UDP GRO -> ESP open in place (a batch at a time) -> GRO coalesce -> tun write.
#include <algorithm>
#include <cstring>

#include "protocols/esp/gp_probe.h"
#include "src/datapath/esp/esp_pipeline.h"

namespace espvpn::datapath {

namespace {
// A slot holds one UDP GRO buffer (or one datagram without GRO); the
// datagrams are opened where recvmmsg put them (views) and written to the
// tun from there, so nothing is copied between the socket and the tun.
constexpr std::size_t kRxSlotCapacity = 65536;

bool same_address(const io::SocketAddress& a, const io::SocketAddress& b) {
    return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

std::atomic<std::uint64_t>* drop_counter(EspRxCounters& c, EspDrop why) {
    switch (why) {
        case EspDrop::none: return nullptr;
        case EspDrop::short_packet: return &c.drop_short_packet;
        case EspDrop::bad_length: return &c.drop_bad_length;
        case EspDrop::unknown_spi: return &c.drop_unknown_spi;
        case EspDrop::replayed: return &c.drop_replayed;
        case EspDrop::too_old: return &c.drop_too_old;
        case EspDrop::bad_icv: return &c.drop_bad_icv;
        case EspDrop::bad_padding: return &c.drop_bad_padding;
        case EspDrop::bad_next_header: return &c.drop_bad_next_header;
    }
    return nullptr;
}
}  // namespace

EspRxPipeline::EspRxPipeline(io::TunDevice& tun, io::UdpSocket& udp, const EspDatapathOptions& options, EspRxToTx& to_tx)
    : tun_(tun), udp_(udp), options_(options), to_tx_(to_tx),
      // Headroom >= the virtio header the tun write prepends; a GRO buffer carries up to ~46
      // datagrams of 1400 bytes.
      batch_({.slots = options.rx_batch, .capacity = kRxSlotCapacity, .headroom = 16, .tailroom = 0,
              .views = 3 * options.rx_batch}),
      sources_(options.learn_peer ? new io::SocketAddress[batch_.entries()] : nullptr),
      open_items_(new EspOpenItem[batch_.entries()]), tun_since_(&tun), linger_(options.rx_linger, options.rx_batch) {}

void EspRxPipeline::run() {
    for (;;) {
        handle_control();
        if (control.stop.load(std::memory_order_acquire)) return;
        if (!drain_udp()) return;
        const Clock::time_point now = Clock::now();
        retire_previous(now);
        if (!wait_for_work(control, udp_.fd(), poll_timeout_ms(now), failure)) return;
        if (linger_.linger_after_wakeup(Clock::now())) bump(counters.lingers);
    }
}

void EspRxPipeline::handle_control() {
    if (!control.begin_handling()) return;
    while (std::unique_ptr<EspInboundSa> sa = sa_updates.take()) {
        const bool had_current = sas_.current() != nullptr;
        sas_.install(std::move(*sa));
        if (had_current) previous_since_ = Clock::now();
        bump(counters.sa_installs);
    }
    publish_sa_state();
}

void EspRxPipeline::publish_sa_state() {
    counters.spi.store(sas_.current() ? sas_.current()->spi() : 0, std::memory_order_relaxed);
    counters.previous_spi.store(sas_.previous() ? sas_.previous()->spi() : 0, std::memory_order_relaxed);
}

void EspRxPipeline::retire_previous(Clock::time_point now) {
    if (sas_.previous() && now - previous_since_ >= options_.previous_sa_grace) {
        sas_.retire_previous();
        bump(counters.sa_retired);
        publish_sa_state();
    }
}

int EspRxPipeline::poll_timeout_ms(Clock::time_point now) const {
    if (!sas_.previous()) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(previous_since_ + options_.previous_sa_grace - now);
    return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count() + 1, 1));
}

bool EspRxPipeline::drain_udp() {
    for (;;) {
        Result<std::size_t> got = udp_.recv_batch(batch_, sources_.get());
        if (!got) {
            failure.set(got.error().message);
            return false;
        }
        mirror_receive_counters(udp_.counters(), counters);  // the receive-side fields are this thread's
        if (batch_.size() == 0) return true;
        const bool ok = open_and_deliver();
        batch_.clear();
        if (!ok) return false;
        if (control.pending()) {
            handle_control();
            if (control.stop.load(std::memory_order_acquire)) return true;
        }
    }
}

// Opens every datagram in place, keeps the inner packets for the tun at the
// front of the batch and writes them (coalesced) with one call.
bool EspRxPipeline::open_and_deliver() {
    const std::size_t n = batch_.size();
    std::size_t kept = 0, authentic = 0, probe_replies = 0;
    std::uint64_t udp_bytes = 0, inner_bytes = 0;
    std::uint32_t last_spi = 0;
    for (std::size_t i = 0; i < n; ++i) open_items_[i].datagram = batch_.packet(i);
    sas_.open_batch({open_items_.get(), n});
    for (std::size_t i = 0; i < n; ++i) {
        const std::span<std::uint8_t> datagram = open_items_[i].datagram;
        udp_bytes += datagram.size();
        const EspReceived& got = open_items_[i].result;
        if (!got.ok()) {
            if (std::atomic<std::uint64_t>* c = drop_counter(counters, got.drop)) bump(*c);
            continue;
        }
        ++authentic;
        last_spi = got.spi;
        if (sources_ && !same_address(sources_[i], peer_)) {
            // Only an authentic packet may move where the gateway sends (roaming client).
            peer_ = sources_[i];
            to_tx_.peer_updates.post(std::make_unique<io::SocketAddress>(peer_));
            bump(counters.peer_changes);
        }
        if (options_.probe.enabled() && is_gp_probe_reply(got.inner, options_.probe.gateway_address())) {
            ++probe_replies;
            continue;  // ours, not the tun's
        }
        (void)batch_.shrink_front(i, static_cast<std::size_t>(got.inner.data() - datagram.data()));
        batch_.set_length(i, got.inner.size());
        inner_bytes += got.inner.size();
        kept = batch_.keep(i, kept);
    }
    batch_.set_size(kept);
    bump(counters.udp_datagrams, n);
    bump(counters.udp_bytes, udp_bytes);
    linger_.received(n, udp_bytes);
    Clock::time_point now{};  // set when something was authentic (always, when something is kept)
    if (authentic) {
        bump(counters.esp_ok, authentic);
        now = Clock::now();
        last_rx.set(now);
        if (probe_replies) {
            bump(counters.probe_replies, probe_replies);
            last_probe_reply.set(now);
        }
        if (to_tx_.last_authentic_spi.load(std::memory_order_relaxed) != last_spi)
            to_tx_.last_authentic_spi.store(last_spi, std::memory_order_relaxed);
    }
    if (kept == 0) return true;
    bump(counters.inner_packets, kept);
    bump(counters.inner_bytes, inner_bytes);
    linger_.delivered(now);
    Result<std::size_t> writes = tun_.write_packets(batch_);
    if (!writes) {
        failure.set(writes.error().message);
        return false;
    }
    bump(counters.tun_writes, *writes);
    mirror(counters.drop_tun_write, tun_since_.write_errors(tun_.counters()));
    return true;
}

}  // namespace espvpn::datapath
