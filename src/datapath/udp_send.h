// What the UDP pipelines (ESP, DTLS) share on the socket side: sending a batch
// with back-pressure, and the socket's counters mirrored into a thread's stats.
#pragma once

#include <string>

#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/io/packet_batch.h"
#include "src/io/udp_socket.h"

namespace espvpn::datapath {

// Sends batch[0, size) on udp with back-pressure: when the socket is full it
// waits for room (or for the control channel) and resends the rest, at most
// kMaxSendWaits times per batch; then what is left is dropped and counted.
// Returns the worst failure seen (unreachable / error), else ok. Counters: a
// tx counter struct with send_retries and the UDP send fields (ESP or DTLS).
inline constexpr int kMaxSendWaits = 100;
void wait_for_send_room(const io::UdpSocket& udp, ControlChannel& control, io::SendStatus why);

template <class Counters>
io::SendStatus send_with_back_pressure(io::UdpSocket& udp, const io::PacketBatch& batch, ControlChannel& control,
                                       Counters& counters) {
    io::SendStatus worst = io::SendStatus::ok;
    std::size_t first = 0;
    for (int waits = 0; batch.size() > 0; ++waits) {
        const io::SendOutcome sent = udp.send_batch(batch, first);
        if (sent.status == io::SendStatus::unreachable || sent.status == io::SendStatus::error) worst = sent.status;
        const bool full = sent.status == io::SendStatus::would_block || sent.status == io::SendStatus::no_buffers;
        if (!full || sent.next >= batch.size()) break;
        if (waits >= kMaxSendWaits || control.stop.load(std::memory_order_relaxed)) {
            udp.count_send_drops(sent.status, batch.size() - sent.next);
            break;
        }
        bump(counters.send_retries);
        wait_for_send_room(udp, control, sent.status);
        first = sent.next;
    }
    return worst;
}

// A UDP pipeline's tx/rx batch sizes: 1..UdpSocket::kMaxBatch each.
inline Status check_batch_sizes(const std::string& what, std::size_t tx, std::size_t rx) {
    const auto ok = [](std::size_t n) { return n >= 1 && n <= io::UdpSocket::kMaxBatch; };
    if (ok(tx) && ok(rx)) return {};
    return make_error(what + ": batch sizes must be 1.." + std::to_string(io::UdpSocket::kMaxBatch));
}

// Which io::UdpCounters field each stats field mirrors: the send side and the receive
// side, each kept by its own thread (the socket's counters are that thread's alone).
#define ESPVPN_UDP_SEND_MIRROR(X)                                                              \
    X(udp_sent, sent) X(udp_send_calls, send_calls) X(udp_gso_messages, gso_messages)          \
    X(drop_socket_full, drop_would_block) X(drop_no_buffers, drop_no_buffers)                  \
    X(drop_unreachable, drop_unreachable) X(drop_udp_too_big, drop_too_big) X(drop_send_error, drop_other) \
    X(send_error_errno, last_send_error)
#define ESPVPN_UDP_RECEIVE_MIRROR(X)                                                           \
    X(udp_recv_calls, receive_calls) X(udp_gro_buffers, gro_buffers) X(udp_peer_errors, peer_errors) \
    X(drop_truncated, drop_truncated)
#define ESPVPN_MIRROR_UDP(stat, udp) mirror(c.stat, u.udp);

template <class Counters>
void mirror_send_counters(const io::UdpCounters& u, Counters& c) { ESPVPN_UDP_SEND_MIRROR(ESPVPN_MIRROR_UDP) }
template <class Counters>
void mirror_receive_counters(const io::UdpCounters& u, Counters& c) { ESPVPN_UDP_RECEIVE_MIRROR(ESPVPN_MIRROR_UDP) }

}  // namespace espvpn::datapath
