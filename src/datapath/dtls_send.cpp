// The DTLS tx pipeline: tun -> (TSO split) -> type byte -> DTLS records -> sendmmsg / UDP GSO.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "protocols/anyconnect/dtls_framing.h"
#include "src/datapath/dtls_pipeline.h"
#include "src/datapath/too_big.h"
#include "src/io/offload.h"

namespace espvpn::datapath {

namespace {
constexpr int kMaxSendWaits = 100;     // per batch, then the rest is dropped and counted
constexpr int kSocketFullWaitMs = 20;  // POLLOUT wait when the send buffer is full
constexpr int kNoBuffersWaitMs = 1;    // ENOBUFS gives no POLLOUT edge: just pause
constexpr std::size_t kControlSlots = 20;  // DPD echoes (16 queued) + request + keepalive

io::PacketBatchShape inner_shape(const DtlsDatapathOptions& o, std::size_t max_inner) {
    io::PacketBatchShape s;
    s.slots = o.tx_batch + kControlSlots;
    s.capacity = std::max({max_inner, o.tun_mtu, std::size_t{1500}});
    s.headroom = 16;  // the type byte goes in front, in place
    s.tailroom = 0;
    return s;
}

io::PacketBatchShape control_shape(const io::DtlsChannel& ch) {
    io::PacketBatchShape s;
    s.slots = kControlSlots;
    s.capacity = ch.record_payload_mtu();
    s.headroom = 0;
    s.tailroom = 0;
    return s;
}

io::PacketBatchShape record_shape(const DtlsDatapathOptions& o, const io::DtlsChannel& ch) {
    io::PacketBatchShape s;
    s.slots = std::max(o.tx_batch, kControlSlots);  // larger batches go in several rounds
    s.capacity = ch.record_payload_mtu() + io::kDtlsMaxRecordOverhead + 32;
    s.headroom = 0;
    s.tailroom = 0;
    return s;
}
}  // namespace

DtlsTxPipeline::DtlsTxPipeline(io::TunDevice* tun, io::UdpSocket& udp, io::DtlsChannel& channel,
                               const DtlsDatapathOptions& options)
    : tun_(tun), udp_(udp), channel_(channel), options_(options), max_inner_(channel.tunnel_mtu()),
      in_(inner_shape(options, channel.tunnel_mtu())), ctrl_(control_shape(channel)),
      out_(record_shape(options, channel)), too_big_buf_(new std::uint8_t[io::kVirtioNetHdrSize + kTooBigMaxSize]) {}

void DtlsTxPipeline::run() {
    // Session mode: only the control channel is watched (fd -1 is ignored by poll).
    pollfd fds[2] = {{options_.read_tun ? tun_->fd() : -1, POLLIN, 0}, {control.fd(), POLLIN, 0}};
    for (;;) {
        handle_control();
        if (control.stop.load(std::memory_order_acquire)) return;
        if (options_.read_tun && !drain_tun()) return;
        if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
            failure.set(std::string("poll: ") + std::strerror(errno));
            return;
        }
        if (fds[1].revents & POLLIN) control.drain();
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

bool DtlsTxPipeline::drain_tun() {
    for (;;) {
        in_.clear();
        Result<std::size_t> got = tun_->read_packets(in_);
        if (!got) {
            failure.set(got.error().message);
            return false;
        }
        const io::TunCounters& t = tun_->counters();  // the read-side fields are this thread's
        mirror(counters.tun_reads, t.reads);
        mirror(counters.tun_super_packets, t.super_packets);
        mirror(counters.drop_split, t.split_drop_total());
        if (in_.size() == 0) return true;
        (void)send_packets(in_);  // failures are counted; the tun path has no CSTP to fall back to here
        in_.clear();
        if (control.pending()) {
            handle_control();
            if (control.stop.load(std::memory_order_acquire)) return true;
        }
    }
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
            answer_too_big(pkt);
            continue;
        }
        const unsigned version = pkt.empty() ? 0 : pkt[0] >> 4;
        if ((version != 4 && version != 6) || !batch.grow_front(i, anyconnect::kDtlsPacketHeaderSize)) {
            ++not_ip;
            continue;
        }
        batch.packet(i)[0] = static_cast<std::uint8_t>(anyconnect::DtlsPacketType::data);
        if (kept != i) batch.swap_packets(kept, i);
        ++kept;
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
        std::size_t first = 0;
        for (int waits = 0; out_.size() > 0; ++waits) {
            io::SendOutcome sent = udp_.send_batch(out_, first);
            if (sent.status == io::SendStatus::unreachable || sent.status == io::SendStatus::error) worst = sent.status;
            const bool full = sent.status == io::SendStatus::would_block || sent.status == io::SendStatus::no_buffers;
            if (!full || sent.next >= out_.size()) break;
            if (waits >= kMaxSendWaits || control.stop.load(std::memory_order_relaxed)) {
                udp_.count_send_drops(sent.status, out_.size() - sent.next);
                break;
            }
            bump(counters.send_retries);
            wait_for_room(sent.status);
            first = sent.next;
        }
    }
    const io::UdpCounters& u = udp_.counters();  // the send-side fields are this thread's
    mirror(counters.udp_sent, u.sent);
    mirror(counters.udp_send_calls, u.send_calls);
    mirror(counters.udp_gso_messages, u.gso_messages);
    mirror(counters.drop_socket_full, u.drop_would_block);
    mirror(counters.drop_no_buffers, u.drop_no_buffers);
    mirror(counters.drop_unreachable, u.drop_unreachable);
    mirror(counters.drop_udp_too_big, u.drop_too_big);
    mirror(counters.drop_send_error, u.drop_other);
    return worst;
}

void DtlsTxPipeline::wait_for_room(io::SendStatus why) {
    pollfd fds[2] = {{udp_.fd(), POLLOUT, 0}, {control.fd(), POLLIN, 0}};
    if (why == io::SendStatus::no_buffers) {
        (void)::poll(&fds[1], 1, kNoBuffersWaitMs);
    } else {
        (void)::poll(fds, 2, kSocketFullWaitMs);
    }
}

// Rare and rate-limited, so a direct write(2) to the tun is fine here.
void DtlsTxPipeline::answer_too_big(std::span<const std::uint8_t> packet) {
    const Clock::time_point now = Clock::now();
    if (now - too_big_window_ >= std::chrono::seconds(1)) {
        too_big_window_ = now;
        too_big_in_window_ = 0;
    }
    if (!tun_ || too_big_in_window_ >= options_.icmp_too_big_per_second) return;
    const std::size_t hdr = tun_->offloads().vnet_hdr ? io::kVirtioNetHdrSize : 0;
    std::memset(too_big_buf_.get(), 0, hdr);  // GSO_NONE, no checksum offload
    const std::size_t n = build_too_big(packet, max_inner_, {too_big_buf_.get() + hdr, kTooBigMaxSize});
    if (n == 0) return;
    ++too_big_in_window_;
    if (::write(tun_->fd(), too_big_buf_.get(), hdr + n) == static_cast<ssize_t>(hdr + n))
        bump(counters.icmp_too_big_sent);
}

}  // namespace espvpn::datapath
