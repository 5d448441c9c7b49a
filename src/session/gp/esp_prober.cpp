#include "src/session/gp/esp_prober.h"

#include <utility>

#include "protocols/esp/gp_probe.h"

namespace espvpn::session {

EspProber::EspProber(io::UdpSocket& udp, EspOutboundSa outbound, EspInboundSa inbound,
                     const datapath::ProbeTarget& target)
    : udp_(udp), out_(std::move(outbound)), in_(std::move(inbound)), target_(target),
      tx_({.slots = 1, .capacity = kGpProbeMaxSize, .headroom = kEspMaxHeadroom, .tailroom = kEspMaxTailroom}),
      // A GRO buffer is split into its datagrams by recv_batch.
      rx_({.slots = 8, .capacity = 65535, .headroom = 0, .tailroom = 0}) {}

void EspProber::send_probe() {
    if (!out_ || !target_.enabled()) return;
    tx_.clear();
    GpProbe probe = build_gp_probe(tx_.next_room(), {target_.source, target_.address_size},
                                   target_.gateway_address(), seq_++);
    if (probe.size == 0) return;
    tx_.commit(probe.size);
    EspSealResult r = out_->seal(tx_.slot(0), tx_.front_room(0), probe.size, probe.next_header);
    if (!r.ok()) return;
    (void)tx_.grow_front(0, out_->headroom());
    tx_.set_length(0, r.packet.size());
    if (udp_.send_batch(tx_).sent == 1) ++sent_;
}

bool EspProber::take_replies() {
    if (!in_) return answered_;
    for (int rounds = 0; rounds < 16; ++rounds) {  // bounded: a flood must not hold the control thread
        rx_.clear();
        Result<std::size_t> got = udp_.recv_batch(rx_);
        if (!got || *got == 0) break;
        for (std::size_t i = 0; i < rx_.size(); ++i) {
            // Anything else is not for the tun now: the HTTPS tunnel carries the traffic.
            EspReceived r = in_->open(rx_.packet(i));
            if (r.ok() && is_gp_probe_reply(r.inner, target_.gateway_address())) answered_ = true;
        }
    }
    return answered_;
}

datapath::EspInitialSas EspProber::release_sas() {
    return {std::exchange(out_, std::nullopt), std::exchange(in_, std::nullopt)};
}

}  // namespace espvpn::session
