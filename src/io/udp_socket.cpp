#include "src/io/udp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/udp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "src/log/logger.h"

namespace espvpn::io {

namespace {
std::string errno_text(int err) { return std::strerror(err); }
constexpr std::size_t kMaxGsoBytes = 65000;  // below 64 KiB minus IP/UDP headers
constexpr std::size_t kGroBuffers = 8;
constexpr std::size_t kGroBufferSize = 65536;
constexpr std::size_t kCmsgSpace = CMSG_SPACE(sizeof(int));
}  // namespace

// One set of message headers per direction: sending and receiving may run on
// different threads at once.
struct MessageArrays {
    mmsghdr msgs[UdpSocket::kMaxBatch];
    iovec iov[UdpSocket::kMaxBatch];
    alignas(cmsghdr) std::uint8_t cmsg[UdpSocket::kMaxBatch][kCmsgSpace];
};

struct UdpSocket::Buffers {
    MessageArrays tx;
    MessageArrays rx;
    sockaddr_storage rx_names[kMaxBatch];
    SocketAddress peer;                     // unconnected sockets send here (length 0: none)
    std::uint32_t msg_first[kMaxBatch];     // first packet of each send message
    std::uint16_t msg_packets[kMaxBatch];   // packets in it
    // GRO receive: whole coalesced buffers, split into the caller's batch.
    std::unique_ptr<std::uint8_t[]> gro_data;
    std::size_t gro_len[kGroBuffers] = {};
    std::size_t gro_seg[kGroBuffers] = {};
    std::size_t gro_count = 0, gro_index = 0, gro_offset = 0;
    bool gro_in_batch = false;              // the buffers are the caller's batch slots (views), not gro_data
    SocketAddress gro_source[kGroBuffers];
};

Result<SocketAddress> SocketAddress::parse(std::string_view text) {
    SocketAddress a;
    std::string_view host, port;
    if (!text.empty() && text[0] == '[') {
        std::size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return make_error("bad address '" + std::string(text) + "': expected [v6]:port");
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) return make_error("bad address '" + std::string(text) + "': no port");
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos)
            return make_error("bad address '" + std::string(text) + "': write IPv6 as [address]:port");
    }
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc{} || ptr != port.data() + port.size() || p > 65535)
        return make_error("bad port in '" + std::string(text) + "'");
    std::string h(host);
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(static_cast<std::uint16_t>(p));
        a.length = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(static_cast<std::uint16_t>(p));
        a.length = sizeof(sockaddr_in6);
    } else {
        return make_error("bad address '" + std::string(text) + "': not a numeric IPv4/IPv6 address");
    }
    return a;
}

std::string numeric_host(const sockaddr* address) {
    char text[INET6_ADDRSTRLEN] = "";
    if (address->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text, sizeof text);
    else if (address->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text, sizeof text);
    return text;
}

std::uint16_t SocketAddress::port() const {
    if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    return 0;
}

std::string SocketAddress::to_string() const {
    char text[INET6_ADDRSTRLEN] = {};
    if (family() == AF_INET) {
        auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
        inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
        return std::string(text) + ":" + std::to_string(ntohs(v4->sin_port));
    }
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6->sin6_port));
}

std::string endpoint_text(std::string_view host, unsigned port) {
    const bool v6 = host.find(':') != std::string_view::npos;
    return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

std::string any_endpoint_like(std::string_view peer_host, unsigned port) {
    return endpoint_text(peer_host.find(':') != std::string_view::npos ? "::" : "0.0.0.0", port);
}

namespace {
// FORCE needs CAP_NET_ADMIN and ignores rmem_max/wmem_max; the plain option is capped by them.
void set_buffer(int fd, int force_opt, int opt, int bytes, const char* what) {
    if (bytes <= 0) return;
    if (::setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) == 0) return;
    if (::setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes) != 0) {
        LOG_DEBUG << "udp: " << what << " " << bytes << ": " << errno_text(errno);
    }
}
}  // namespace

Result<UniqueFd> open_udp_fd(int family, int send_buffer, int receive_buffer) {
    UniqueFd fd(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return make_error("udp socket: " + errno_text(errno));
    set_buffer(fd.get(), SO_SNDBUFFORCE, SO_SNDBUF, send_buffer, "send buffer");
    set_buffer(fd.get(), SO_RCVBUFFORCE, SO_RCVBUF, receive_buffer, "receive buffer");
    return fd;
}

Result<UdpSocket> UdpSocket::open(const UdpOptions& options) {
    SocketAddress local, remote;
    if (!options.remote.empty()) {
        auto r = SocketAddress::parse(options.remote);
        if (!r) return r.error();
        remote = *r;
    }
    if (!options.local.empty()) {
        auto l = SocketAddress::parse(options.local);
        if (!l) return l.error();
        local = *l;
    }
    if (options.local.empty() && options.remote.empty()) return make_error("udp socket needs a local or a remote address");
    if (!options.local.empty() && !options.remote.empty() && local.family() != remote.family())
        return make_error("udp local " + options.local + " and remote " + options.remote + " differ in family");
    const int family = options.remote.empty() ? local.family() : remote.family();

    UdpSocket s;
    auto fd = options.make_socket ? options.make_socket(family, options.send_buffer, options.receive_buffer)
                                  : open_udp_fd(family, options.send_buffer, options.receive_buffer);
    if (!fd) return fd.error();
    s.fd_ = std::move(*fd);
    if (!options.local.empty() &&
        ::bind(s.fd_.get(), reinterpret_cast<const sockaddr*>(&local.storage), local.length) != 0)
        return make_error("udp bind " + options.local + ": " + errno_text(errno));
    if (!options.remote.empty()) {
        if (::connect(s.fd_.get(), reinterpret_cast<const sockaddr*>(&remote.storage), remote.length) != 0)
            return make_error("udp connect " + options.remote + ": " + errno_text(errno));
        s.connected_ = true;
    }
    if (options.gso) {
        int zero = 0;  // probe: kernels with UDP_SEGMENT accept a zero size
        s.gso_ = ::setsockopt(s.fd_.get(), SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
    }
    if (options.gro) {
        int one = 1;
        s.gro_ = ::setsockopt(s.fd_.get(), SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    }
    s.buf_ = std::make_unique<Buffers>();
    if (s.gro_) s.buf_->gro_data.reset(new std::uint8_t[kGroBuffers * kGroBufferSize]);
    LOG_DEBUG << "udp: gso=" << s.gso_ << " gro=" << s.gro_;
    return s;
}

// Here, where Buffers is complete.
UdpSocket::UdpSocket(UdpSocket&&) noexcept = default;
UdpSocket& UdpSocket::operator=(UdpSocket&&) noexcept = default;
UdpSocket::~UdpSocket() = default;

Result<SocketAddress> UdpSocket::local_address() const {
    SocketAddress a;
    a.length = sizeof a.storage;
    if (::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
        return make_error("getsockname: " + errno_text(errno));
    return a;
}

bool UdpSocket::wait_readable(int timeout_ms) const {
    if (buf_ && buf_->gro_index < buf_->gro_count) return true;
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

SendOutcome UdpSocket::send_batch(const PacketBatch& batch, std::size_t first) {
    SendOutcome outcome;
    outcome.next = batch.size();
    Buffers& b = *buf_;
    if (!connected_ && b.peer.length == 0) {
        outcome.status = SendStatus::error;
        outcome.error = EDESTADDRREQ;
        counters_.drop_other += batch.size() > first ? batch.size() - first : 0;
        return outcome;
    }
    MessageArrays& tx = b.tx;
    auto drop = [&](std::uint64_t& counter, std::size_t packets, SendStatus status, int err) {
        counter += packets;
        outcome.status = status;
        outcome.error = err;
    };
    std::size_t i = first;
    const std::size_t n = batch.size();
    while (i < n) {
        // Messages: runs of equal-sized packets (the last may be shorter) as one GSO send.
        std::size_t m = 0, iov_used = 0;
        while (i < n && m < kMaxBatch && iov_used < kMaxBatch) {
            const std::size_t len = batch.length(i);
            std::size_t segs = 1, total = len;
            if (gso_ && len > 0) {
                while (i + segs < n && segs < kMaxSegments && iov_used + segs < kMaxBatch) {
                    std::size_t next = batch.length(i + segs);
                    if (next == 0 || next > len || total + next > kMaxGsoBytes) break;
                    ++segs;
                    total += next;
                    if (next < len) break;
                }
            }
            mmsghdr& mh = tx.msgs[m];
            mh = {};
            for (std::size_t k = 0; k < segs; ++k) {
                auto p = batch.packet(i + k);
                tx.iov[iov_used + k] = {const_cast<std::uint8_t*>(p.data()), p.size()};
            }
            mh.msg_hdr.msg_iov = &tx.iov[iov_used];
            mh.msg_hdr.msg_iovlen = segs;
            if (!connected_) {
                mh.msg_hdr.msg_name = &b.peer.storage;
                mh.msg_hdr.msg_namelen = b.peer.length;
            }
            if (segs > 1) {
                mh.msg_hdr.msg_control = tx.cmsg[m];
                mh.msg_hdr.msg_controllen = CMSG_SPACE(sizeof(std::uint16_t));
                cmsghdr* c = CMSG_FIRSTHDR(&mh.msg_hdr);
                c->cmsg_level = SOL_UDP;
                c->cmsg_type = UDP_SEGMENT;
                c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
                std::uint16_t seg = static_cast<std::uint16_t>(len);
                std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
            }
            b.msg_first[m] = static_cast<std::uint32_t>(i);
            b.msg_packets[m] = static_cast<std::uint16_t>(segs);
            ++m;
            iov_used += segs;
            i += segs;
        }
        std::size_t done = 0;
        bool rebuild = false;
        while (done < m) {
            ++counters_.send_calls;
            int r = ::sendmmsg(fd_.get(), &tx.msgs[done], static_cast<unsigned>(m - done), MSG_DONTWAIT);
            if (r > 0) {
                for (int k = 0; k < r; ++k) {
                    std::size_t packets = b.msg_packets[done + static_cast<std::size_t>(k)];
                    outcome.sent += packets;
                    counters_.sent += packets;
                    if (packets > 1) ++counters_.gso_messages;
                }
                done += static_cast<std::size_t>(r);
                continue;
            }
            const int err = errno;
            if (err == EINTR) continue;
            const std::size_t failed_packets = b.msg_packets[done];
            if ((err == EIO || err == EINVAL) && failed_packets > 1 && gso_) {
                // The route cannot segment (no checksum offload, xfrm, ...): stop using GSO.
                LOG_INFO << "udp: GSO send failed (" << errno_text(err) << "), sending one datagram per message";
                gso_ = false;
                i = b.msg_first[done];
                rebuild = true;
                break;
            }
            if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
                // Not counted here: the caller retries from outcome.next or calls count_send_drops.
                outcome.status = err == ENOBUFS ? SendStatus::no_buffers : SendStatus::would_block;
                outcome.error = err;
                outcome.next = b.msg_first[done];
                return outcome;
            }
            if (err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN)
                drop(counters_.drop_unreachable, failed_packets, SendStatus::unreachable, err);
            else if (err == EMSGSIZE)
                drop(counters_.drop_too_big, failed_packets, SendStatus::error, err);
            else {
                // Unexpected: say which error once per kind, so a drop_send_error has a cause.
                if (err != counters_.last_send_error)
                    LOG_WARN << "udp: send failed (" << errno_text(err) << "), " << failed_packets
                             << " datagram(s) dropped (said once per error)";
                counters_.last_send_error = err;
                drop(counters_.drop_other, failed_packets, SendStatus::error, err);
            }
            ++done;  // that message is lost; the rest may still go
        }
        if (rebuild) continue;
    }
    return outcome;
}

void UdpSocket::set_peer(const SocketAddress& peer) { buf_->peer = peer; }

void UdpSocket::count_send_drops(SendStatus why, std::size_t packets) {
    if (why == SendStatus::no_buffers) counters_.drop_no_buffers += packets;
    else if (why == SendStatus::would_block) counters_.drop_would_block += packets;
    else if (why == SendStatus::unreachable) counters_.drop_unreachable += packets;
    else counters_.drop_other += packets;
}

namespace {
// GRO buffers can be received straight into the caller's slots when it takes views of them.
bool can_receive_in_place(const PacketBatch& out) {
    return out.shape().views > 0 && out.capacity() + out.shape().tailroom >= kGroBufferSize;
}
}  // namespace

std::size_t UdpSocket::drain_gro(PacketBatch& out, SocketAddress* sources) {
    Buffers& b = *buf_;
    std::size_t appended = 0;
    while (b.gro_index < b.gro_count && !(b.gro_in_batch ? out.views_full() : out.full())) {
        const std::size_t len = b.gro_len[b.gro_index];
        const std::size_t seg = b.gro_seg[b.gro_index];
        if (b.gro_offset >= len) {
            ++b.gro_index;
            b.gro_offset = 0;
            continue;
        }
        const std::size_t take = std::min(seg, len - b.gro_offset);
        if (b.gro_in_batch) {
            // The datagram stays where recvmmsg put it: the packet is a view of it.
            if (sources) sources[out.size()] = b.gro_source[b.gro_index];
            (void)out.add_view(b.gro_index, out.headroom() + b.gro_offset, take, 0);
            ++appended;
        } else if (take > out.capacity()) {
            ++counters_.drop_truncated;
        } else {
            std::memcpy(out.next_room().data(), b.gro_data.get() + b.gro_index * kGroBufferSize + b.gro_offset, take);
            if (sources) sources[out.size()] = b.gro_source[b.gro_index];
            out.commit(take);
            ++appended;
        }
        b.gro_offset += take;
        if (b.gro_offset >= len) {  // step on now: wait_readable must not see a spent buffer as pending
            ++b.gro_index;
            b.gro_offset = 0;
        }
    }
    counters_.received += appended;
    return appended;
}

// One non-blocking recvmmsg. Nothing to read, an interrupted call and an ICMP error the kernel
// reports for the connected peer (counted) are all "0 messages"; anything else is an error.
Result<int> UdpSocket::receive_messages(mmsghdr* msgs, std::size_t count) {
    ++counters_.receive_calls;
    int r = ::recvmmsg(fd_.get(), msgs, static_cast<unsigned>(count), MSG_DONTWAIT, nullptr);
    if (r >= 0) return r;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH) {
        ++counters_.peer_errors;
        return 0;
    }
    return make_error("udp recvmmsg: " + errno_text(errno));
}

Result<std::size_t> UdpSocket::recv_batch(PacketBatch& out, SocketAddress* sources) {
    Buffers& b = *buf_;
    MessageArrays& rx = b.rx;
    std::size_t appended = 0;
    // Message k receives into [at, at + size), with room for the GRO cmsg when asked,
    // and the sender's address when the caller wants it.
    auto prepare = [&](std::size_t k, std::uint8_t* at, std::size_t size, bool control) {
        rx.iov[k] = {at, size};
        mmsghdr& mh = rx.msgs[k];
        mh = {};
        mh.msg_hdr.msg_iov = &rx.iov[k];
        mh.msg_hdr.msg_iovlen = 1;
        if (control) {
            mh.msg_hdr.msg_control = rx.cmsg[k];
            mh.msg_hdr.msg_controllen = kCmsgSpace;
        }
        if (sources) {
            mh.msg_hdr.msg_name = &b.rx_names[k];
            mh.msg_hdr.msg_namelen = sizeof b.rx_names[k];
        }
    };
    auto name_of = [&](const mmsghdr& mh, std::size_t k) {
        SocketAddress a;
        a.length = mh.msg_hdr.msg_namelen;
        std::memcpy(&a.storage, &b.rx_names[k], std::min<std::size_t>(a.length, sizeof a.storage));
        return a;
    };
    if (gro_) {
        appended += drain_gro(out, sources);
        if (b.gro_index < b.gro_count) return appended;  // `out` is full; the rest waits
        // In place needs an empty batch: its slots are about to be overwritten.
        const bool in_place = can_receive_in_place(out);
        if (in_place ? out.size() > 0 : out.full()) return appended;
        b.gro_in_batch = in_place;
        const std::size_t buffers = b.gro_in_batch ? std::min(kGroBuffers, out.slots()) : kGroBuffers;
        for (std::size_t k = 0; k < buffers; ++k) {
            std::uint8_t* at = b.gro_in_batch ? out.storage(k).data() + out.headroom() : b.gro_data.get() + k * kGroBufferSize;
            prepare(k, at, kGroBufferSize, true);
        }
        auto got = receive_messages(rx.msgs, buffers);
        if (!got) return got.error();
        const int r = *got;
        if (r == 0) return appended;
        b.gro_count = static_cast<std::size_t>(r);
        b.gro_index = 0;
        b.gro_offset = 0;
        for (std::size_t k = 0; k < b.gro_count; ++k) {
            mmsghdr& mh = rx.msgs[k];
            b.gro_len[k] = mh.msg_len;
            if (sources) b.gro_source[k] = name_of(mh, k);
            b.gro_seg[k] = mh.msg_len;
            if (mh.msg_hdr.msg_flags & MSG_TRUNC) {
                ++counters_.drop_truncated;
                b.gro_len[k] = 0;
                continue;
            }
            for (cmsghdr* c = CMSG_FIRSTHDR(&mh.msg_hdr); c; c = CMSG_NXTHDR(&mh.msg_hdr, c)) {
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                    int seg = 0;
                    std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
                    if (seg > 0) b.gro_seg[k] = static_cast<std::size_t>(seg);
                }
            }
            if (b.gro_seg[k] < b.gro_len[k]) ++counters_.gro_buffers;
            if (b.gro_seg[k] == 0) b.gro_len[k] = 0;  // empty datagram: nothing to hand out
        }
        return appended + drain_gro(out, sources);
    }

    // Without GRO every datagram lands directly in its slot.
    const std::size_t start = out.size();
    const std::size_t want = std::min(out.free_slots(), kMaxBatch);
    if (want == 0) return appended;
    for (std::size_t k = 0; k < want; ++k) {
        out.reset_slot(start + k);
        prepare(k, out.slot(start + k).data() + out.headroom(), out.capacity(), false);
    }
    auto got = receive_messages(rx.msgs, want);
    if (!got) return got.error();
    const int r = *got;
    if (r == 0) return appended;
    std::size_t kept = 0;
    for (std::size_t k = 0; k < static_cast<std::size_t>(r); ++k) {
        if (rx.msgs[k].msg_hdr.msg_flags & MSG_TRUNC) {
            ++counters_.drop_truncated;
            continue;
        }
        if (kept != k) std::memcpy(rx.iov[kept].iov_base, rx.iov[k].iov_base, rx.msgs[k].msg_len);  // rare: close the gap
        out.set_length(start + kept, rx.msgs[k].msg_len);
        if (sources) sources[start + kept] = name_of(rx.msgs[k], k);
        ++kept;
    }
    out.set_size(start + kept);
    counters_.received += kept;
    return appended + kept;
}

}  // namespace espvpn::io
