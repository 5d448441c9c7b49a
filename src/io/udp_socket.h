// UdpSocket: the ESP/DTLS datagram socket, read and written in batches.
//
// send_batch groups runs of equal-sized packets into one UDP_SEGMENT (GSO)
// message each and sends all messages with one sendmmsg; recv_batch takes a
// recvmmsg batch and, with UDP_GRO, splits coalesced buffers back into
// datagrams by their gso_size. Both fall back to one datagram per message
// when the kernel (or the route) does not support GSO/GRO.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "src/io/packet_batch.h"
#include "src/io/unique_fd.h"

struct mmsghdr;

namespace espvpn::io {

// "192.0.2.1:4501", "[2001:db8::1]:443".
struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;

    static Result<SocketAddress> parse(std::string_view text);
    int family() const { return storage.ss_family; }
    std::uint16_t port() const;  // of an IPv4/IPv6 address (0 for another family)
    std::string to_string() const;
};

// "host:port" as SocketAddress::parse reads it (an IPv6 host in brackets).
std::string endpoint_text(std::string_view host, unsigned port);
// The numeric host of an IPv4/IPv6 socket address, "" for another family.
std::string numeric_host(const sockaddr* address);
// The wildcard address of `peer_host`'s family with `port`, to bind beside a connect to it.
std::string any_endpoint_like(std::string_view peer_host, unsigned port);

struct UdpOptions {
    std::string local;             // bind address; empty: any address of the remote's family, any port
    std::string remote;            // connect to this peer; empty: unconnected (receive only)
    int send_buffer = 4 << 20;
    int receive_buffer = 4 << 20;
    bool gso = true;
    bool gro = true;
    // Makes the socket (family, send_buffer, receive_buffer) when set: the broker, whose
    // CAP_NET_ADMIN lets SO_SNDBUFFORCE/SO_RCVBUFFORCE exceed the sysctl limits. Unset: socket(2) here.
    std::function<Result<UniqueFd>(int family, int send_buffer, int receive_buffer)> make_socket;
};
// The socket UdpSocket::open makes by itself: non-blocking, close-on-exec, the buffers forced
// where the process may (CAP_NET_ADMIN), else as large as the sysctl limits allow.
Result<UniqueFd> open_udp_fd(int family, int send_buffer, int receive_buffer);

struct UdpCounters {
    std::uint64_t sent = 0;             // datagrams handed to the kernel
    std::uint64_t send_calls = 0;       // sendmmsg calls
    std::uint64_t gso_messages = 0;     // messages carrying more than one segment
    std::uint64_t received = 0;         // datagrams given to the caller
    std::uint64_t receive_calls = 0;
    std::uint64_t gro_buffers = 0;      // received buffers holding more than one datagram
    std::uint64_t peer_errors = 0;      // ICMP errors (refused/unreachable) reported on receive
    // Drops by reason (datagrams):
    std::uint64_t drop_would_block = 0; // socket send buffer full (EAGAIN)
    std::uint64_t drop_no_buffers = 0;  // ENOBUFS: the qdisc/device queue is full
    std::uint64_t drop_unreachable = 0; // ECONNREFUSED / host or net unreachable (ICMP)
    std::uint64_t drop_too_big = 0;     // EMSGSIZE
    std::uint64_t drop_other = 0;
    int last_send_error = 0;            // errno of the latest drop_other on send (0: none)
    std::uint64_t drop_truncated = 0;   // received datagram larger than a slot
};

enum class SendStatus { ok, would_block, no_buffers, unreachable, error };

struct SendOutcome {
    std::size_t sent = 0;      // packets sent, from the first given
    std::size_t next = 0;      // first packet not yet tried (batch.size() when all were): retry from here
    SendStatus status = SendStatus::ok;
    int error = 0;             // errno of the last failure, if any
};

class UdpSocket {
public:
    static constexpr std::size_t kMaxBatch = 256;
    static constexpr std::size_t kMaxSegments = 64;  // UDP_MAX_SEGMENTS

    static Result<UdpSocket> open(const UdpOptions& options);
    UdpSocket(UdpSocket&&) noexcept;
    UdpSocket& operator=(UdpSocket&&) noexcept;
    ~UdpSocket();

    int fd() const { return fd_.get(); }
    bool gso() const { return gso_; }
    bool gro() const { return gro_; }
    Result<SocketAddress> local_address() const;
    const UdpCounters& counters() const { return counters_; }

    bool wait_readable(int timeout_ms) const;

    // Sends packets [first, batch.size()) to the connected peer (or, for an
    // unconnected socket, to the one set with set_peer). Packets that could not
    // be sent are counted by reason; the outcome says why the last failure
    // happened (never blocks). On would_block/no_buffers the packets from
    // outcome.next on were not tried: the caller may wait and retry them
    // (they are counted as drops only if it does not).
    SendOutcome send_batch(const PacketBatch& batch, std::size_t first = 0);
    // Destination for send_batch on an unconnected socket (a gateway learns it
    // from the first authentic packet).
    void set_peer(const SocketAddress& peer);
    // Counts packets the caller gave up retrying after would_block/no_buffers.
    void count_send_drops(SendStatus why, std::size_t packets);

    // Appends received datagrams to `out` (never blocks). Returns how many.
    // Datagrams of a GRO buffer that do not fit `out` stay for the next call.
    // A batch with views (shape.views > 0, slots of >= 64 KiB) gets the GRO
    // buffers received straight into its slots, its packets being views of
    // them (no copy); it must then be empty when passed, and be the same
    // batch on the next call while datagrams are left over.
    // With `sources` (out.slots() entries), sources[i] is set to the sender
    // of packet i for every packet appended.
    Result<std::size_t> recv_batch(PacketBatch& out, SocketAddress* sources = nullptr);

    // send_batch and recv_batch use separate buffers: one thread may send while
    // another receives (the datapath's tx and rx threads share this socket).

private:
    UdpSocket() = default;
    struct Buffers;
    std::size_t drain_gro(PacketBatch& out, SocketAddress* sources);
    Result<int> receive_messages(mmsghdr* msgs, std::size_t count);

    UniqueFd fd_;
    bool gso_ = false;
    bool gro_ = false;
    bool connected_ = false;
    UdpCounters counters_;
    std::unique_ptr<Buffers> buf_;
};

}  // namespace espvpn::io
