// The DTLS tx pipeline: IP packets from the tun's reader -> type byte -> DTLS records -> sendmmsg / UDP GSO.
#include <algorithm>

#include "protocols/anyconnect/dtls_framing.h"
#include "src/datapath/dtls/dtls_pipeline.h"
#include "src/datapath/too_big.h"

namespace espvpn::datapath {

namespace {
constexpr std::size_t kControlSlots = 20;  // DPD echoes (16 queued) + request + keepalive
}  // namespace

DtlsTxPipeline::DtlsTxPipeline(io::TunDevice* tun, io::UdpSocket& udp, io::DtlsChannel& channel,
                               const DtlsDatapathOptions& options)
    : tun_(tun), udp_(udp), channel_(channel), max_inner_(channel.tunnel_mtu()),
      ctrl_({.slots = kControlSlots, .capacity = channel.record_payload_mtu(), .headroom = 0, .tailroom = 0}),
      // Larger batches go in several rounds.
      out_({.slots = std::max(options.tx_batch, kControlSlots),
            .capacity = channel.record_payload_mtu() + io::kDtlsMaxRecordOverhead + 32,
            .headroom = 0,
            .tailroom = 0}),
      too_big_(options.icmp_too_big_per_second) {}

void DtlsTxPipeline::run() {
    // Data comes through send() from the tun's reader; this thread sends control packets.
    for (;;) {
        handle_control();
        if (control.stop.load(std::memory_order_acquire)) return;
        if (!wait_for_work(control, -1, -1, failure)) return;
    }
}

// Between batches: control packets asked for by the control thread (DPD
// request, keepalive) and by rx (answers to the server's DPD requests).
void DtlsTxPipeline::handle_control() {
    if (!control.begin_handling()) return;
    using anyconnect::DtlsPacketType;
    ctrl_.clear();
    const std::size_t max_payload = channel_.tunnel_mtu();
    std::uint64_t echoes = 0;
    while (!ctrl_.full()) {
        std::unique_ptr<DpdEcho> echo = dpd_echoes.take();
        if (!echo) break;
        std::span<const std::uint8_t> payload(echo->payload.data(), std::min(echo->payload.size(), max_payload));
        if (std::size_t n = anyconnect::write_dtls_packet(DtlsPacketType::dpd_response, payload, ctrl_.next_room())) {
            ctrl_.commit(n);
            ++echoes;
        }
    }
    const std::uint32_t dpd_wanted = dpd_requests.load(std::memory_order_acquire);
    const bool dpd = dpd_wanted != dpd_done_ && !ctrl_.full();
    if (dpd) ctrl_.commit(anyconnect::write_dtls_packet(DtlsPacketType::dpd_request, {}, ctrl_.next_room()));
    dpd_done_ = dpd_wanted;
    const std::uint32_t ka_wanted = keepalives.load(std::memory_order_acquire);
    const bool keepalive = ka_wanted != keepalives_done_ && !ctrl_.full();
    if (keepalive) ctrl_.commit(anyconnect::write_dtls_packet(DtlsPacketType::keepalive, {}, ctrl_.next_room()));
    keepalives_done_ = ka_wanted;
    if (ctrl_.size() == 0) return;
    if (echoes) bump(counters.dpd_responses_sent, echoes);
    if (dpd) bump(counters.dpd_requests_sent);
    if (keepalive) bump(counters.keepalives_sent);
    (void)seal_and_send(ctrl_);
    ctrl_.clear();
}

Status DtlsTxPipeline::send_packets(io::PacketBatch& batch) {
    frame(batch);
    if (batch.size() == 0) return {};
    const io::SendStatus status = seal_and_send(batch);
    if (status == io::SendStatus::unreachable) return make_error("DTLS: the server's UDP port is unreachable");
    if (status == io::SendStatus::error) return make_error("DTLS: UDP send failed");
    return {};
}

// Puts the data type byte in front of every IP packet (in the headroom) and
// drops what cannot go.
void DtlsTxPipeline::frame(io::PacketBatch& batch) {
    const std::size_t n = batch.size();
    std::size_t kept = 0;
    std::uint64_t bytes = 0, too_big = 0, not_ip = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::span<std::uint8_t> pkt = batch.packet(i);
        bytes += pkt.size();
        if (pkt.size() > max_inner_) {
            ++too_big;
            if (tun_ && too_big_.answer(*tun_, pkt, max_inner_)) bump(counters.icmp_too_big_sent);
            continue;
        }
        const unsigned version = pkt.empty() ? 0 : pkt[0] >> 4;
        if ((version != 4 && version != 6) || !batch.grow_front(i, anyconnect::kDtlsPacketHeaderSize)) {
            ++not_ip;
            continue;
        }
        batch.packet(i)[0] = static_cast<std::uint8_t>(anyconnect::DtlsPacketType::data);
        kept = batch.keep(i, kept);
    }
    batch.set_size(kept);
    bump(counters.inner_packets, n);
    bump(counters.inner_bytes, bytes);
    if (too_big) bump(counters.drop_too_big, too_big);
    if (not_ip) bump(counters.drop_not_ip, not_ip);
}

// Seals `plain` into out_ and sends it, out_ at a time: one sendmmsg per batch
// normally; when the socket is full, wait for room and send the rest
// (back-pressure to the tun). Returns the worst send status seen.
io::SendStatus DtlsTxPipeline::seal_and_send(const io::PacketBatch& plain) {
    std::lock_guard<std::mutex> lock(seal_mutex_);
    io::SendStatus worst = io::SendStatus::ok;
    for (std::size_t next = 0; next < plain.size();) {
        out_.clear();
        const io::DtlsSealOutcome sealed = channel_.seal_batch(plain, out_, next);
        next = sealed.next;
        std::uint64_t bytes = 0;
        for (std::size_t i = 0; i < out_.size(); ++i) bytes += out_.length(i);
        bump(counters.records, sealed.records);
        bump(counters.record_bytes, bytes);
        if (sealed.too_big) bump(counters.drop_too_big, sealed.too_big);
        if (sealed.failed) bump(counters.drop_seal_failed, sealed.failed);
        const io::SendStatus status = send_with_back_pressure(udp_, out_, control, counters);
        if (status != io::SendStatus::ok) worst = status;
    }
    mirror_send_counters(udp_.counters(), counters);  // the send-side fields are this thread's
    return worst;
}

}  // namespace espvpn::datapath
