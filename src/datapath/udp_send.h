// What the UDP pipelines (ESP, DTLS) share on the socket side: sending a batch
// with back-pressure, and the socket's counters mirrored into a thread's stats.
#pragma once

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

// The socket's send-side counters (kept by this thread) into the thread's stats.
template <class Counters>
void mirror_send_counters(const io::UdpCounters& u, Counters& c) {
    mirror(c.udp_sent, u.sent);
    mirror(c.udp_send_calls, u.send_calls);
    mirror(c.udp_gso_messages, u.gso_messages);
    mirror(c.drop_socket_full, u.drop_would_block);
    mirror(c.drop_no_buffers, u.drop_no_buffers);
    mirror(c.drop_unreachable, u.drop_unreachable);
    mirror(c.drop_udp_too_big, u.drop_too_big);
    mirror(c.drop_send_error, u.drop_other);
}

// The socket's receive-side counters (kept by this thread) into the thread's stats.
template <class Counters>
void mirror_receive_counters(const io::UdpCounters& u, Counters& c) {
    mirror(c.udp_recv_calls, u.receive_calls);
    mirror(c.udp_gro_buffers, u.gro_buffers);
    mirror(c.udp_peer_errors, u.peer_errors);
    mirror(c.drop_truncated, u.drop_truncated);
}

}  // namespace espvpn::datapath
