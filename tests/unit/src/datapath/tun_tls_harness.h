// Test harness for the pipelines that run on a tun in a private network
// namespace (made by the test thread, gone with it) and a TLS session over a
// socketpair whose other end the test plays (the gateway / the server). Needs
// root (tun + unshare); tests are skipped otherwise.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocols/gp/https_tunnel.h"
#include "src/io/tun_device.h"

namespace espvpn::test {

using Bytes = std::vector<std::uint8_t>;


inline std::uint16_t ip_checksum(const std::uint8_t* p, std::size_t n) {
    std::uint32_t acc = 0;
    for (std::size_t i = 0; i + 1 < n; i += 2) acc += (p[i] << 8) | p[i + 1];
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return static_cast<std::uint16_t>(~acc);
}

// IPv4/UDP from 10.9.0.2:5555 to 10.9.0.1:port (UDP checksum 0: none).
inline Bytes udp_to_tun_address(std::uint16_t port, const std::string& text) {
    Bytes p(28 + text.size(), 0);
    p[0] = 0x45;
    p[2] = static_cast<std::uint8_t>(p.size() >> 8);
    p[3] = static_cast<std::uint8_t>(p.size());
    p[8] = 64;
    p[9] = 17;
    const std::uint8_t src[4] = {10, 9, 0, 2}, dst[4] = {10, 9, 0, 1};
    std::memcpy(&p[12], src, 4);
    std::memcpy(&p[16], dst, 4);
    const std::uint16_t sum = ip_checksum(p.data(), 20);
    p[10] = static_cast<std::uint8_t>(sum >> 8);
    p[11] = static_cast<std::uint8_t>(sum);
    p[20] = 5555 >> 8;
    p[21] = 5555 & 0xff;
    p[22] = static_cast<std::uint8_t>(port >> 8);
    p[23] = static_cast<std::uint8_t>(port);
    p[24] = static_cast<std::uint8_t>((8 + text.size()) >> 8);
    p[25] = static_cast<std::uint8_t>(8 + text.size());
    std::memcpy(&p[28], text.data(), text.size());
    return p;
}

inline Bytes frame(std::span<const std::uint8_t> packet) {
    auto h = gp::frame_header_for_packet(packet);
    REQUIRE(h);
    Bytes f(gp::kFrameHeaderSize + packet.size());
    std::memcpy(f.data(), h->data(), gp::kFrameHeaderSize);
    std::memcpy(f.data() + gp::kFrameHeaderSize, packet.data(), packet.size());
    return f;
}

// Both ends of an anonymous TLS 1.2 session over a socketpair; the client end
// is for the pipeline, the server end (blocking, 5 s receive timeout) plays the gateway.
class TlsPair {
public:
    TlsPair() {
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_) == 0);
        timeval tv{5, 0};
        ::setsockopt(fds_[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        gnutls_anon_allocate_client_credentials(&client_cred_);
        gnutls_anon_allocate_server_credentials(&server_cred_);
        const char* prio = "NORMAL:-VERS-ALL:+VERS-TLS1.2:+ANON-ECDH";
        gnutls_init(&client_, GNUTLS_CLIENT);
        gnutls_priority_set_direct(client_, prio, nullptr);
        gnutls_credentials_set(client_, GNUTLS_CRD_ANON, client_cred_);
        gnutls_transport_set_int(client_, fds_[0]);
        gnutls_init(&server_, GNUTLS_SERVER);
        gnutls_priority_set_direct(server_, prio, nullptr);
        gnutls_credentials_set(server_, GNUTLS_CRD_ANON, server_cred_);
        gnutls_transport_set_int(server_, fds_[1]);
        int client_rc = 0;
        std::thread c([&] {
            do client_rc = gnutls_handshake(client_);
            while (client_rc < 0 && !gnutls_error_is_fatal(client_rc));
        });
        int rc;
        do rc = gnutls_handshake(server_);
        while (rc < 0 && !gnutls_error_is_fatal(rc));
        c.join();
        REQUIRE_MESSAGE(rc == 0, gnutls_strerror(rc));
        REQUIRE_MESSAGE(client_rc == 0, gnutls_strerror(client_rc));
    }
    ~TlsPair() {
        gnutls_deinit(client_);
        gnutls_deinit(server_);
        gnutls_anon_free_client_credentials(client_cred_);
        gnutls_anon_free_server_credentials(server_cred_);
        ::close(fds_[0]);
        if (fds_[1] >= 0) ::close(fds_[1]);
    }
    gnutls_session_t client() const { return client_; }
    gnutls_session_t server() const { return server_; }
    int client_fd() const { return fds_[0]; }

    // The gateway side.
    void send(std::span<const std::uint8_t> bytes) {
        std::size_t off = 0;
        while (off < bytes.size()) {
            ssize_t n = gnutls_record_send(server_, bytes.data() + off, bytes.size() - off);
            REQUIRE(n > 0);
            off += static_cast<std::size_t>(n);
        }
    }
    // The next frame from the pipeline (nullopt after 5 s without one).
    std::optional<std::pair<gp::GpFrameType, Bytes>> next_frame() {
        for (;;) {
            std::span<const std::uint8_t> in(pending_.data() + used_, pending_.size() - used_);
            const std::size_t before = in.size();
            auto f = decoder_.next(in);
            REQUIRE(f);
            used_ += before - in.size();
            if (*f) {
                ++frames_;
                return std::make_pair((*f)->type, Bytes((*f)->payload.begin(), (*f)->payload.end()));
            }
            std::uint8_t buf[16384];
            ssize_t n = gnutls_record_recv(server_, buf, sizeof buf);
            if (n <= 0) return std::nullopt;
            ++records_;
            pending_.assign(buf, buf + n);
            used_ = 0;
        }
    }
    std::size_t frames() const { return frames_; }
    std::size_t records() const { return records_; }
    void close_server() {
        gnutls_bye(server_, GNUTLS_SHUT_WR);
        ::close(fds_[1]);
        fds_[1] = -1;
    }

private:
    int fds_[2] = {-1, -1};
    gnutls_anon_client_credentials_t client_cred_{};
    gnutls_anon_server_credentials_t server_cred_{};
    gnutls_session_t client_{}, server_{};
    gp::GpFrameDecoder decoder_{65535};
    Bytes pending_;
    std::size_t used_ = 0;
    std::size_t frames_ = 0, records_ = 0;
};

inline int udp_socket_bound(const char* ip, std::uint16_t port) {
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, ip, &a.sin_addr);
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const int bytes = 8 << 20;  // a burst of small datagrams must not overflow the socket
    ::setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes);
    return s;
}

// Runs `body` on a thread of its own in a fresh network namespace with a tun
// device 10.9.0.1/24 (up, MTU 1400). False when that is not possible here.
inline bool in_private_netns(const std::function<void(io::TunDevice&)>& body) {
    bool ran = false;
    std::string why;
    std::thread t([&] {
        if (::geteuid() != 0 || ::unshare(CLONE_NEWNET) != 0) {
            why = "needs root and unshare(CLONE_NEWNET)";
            return;
        }
        auto tun = io::TunDevice::open({});
        if (!tun) {
            why = tun.error().message;
            return;
        }
        auto addr = io::InterfaceAddress::parse("10.9.0.1/24");
        if (!tun->set_mtu(1400) || !tun->add_address(*addr) || !tun->set_up(true)) {
            why = "cannot configure the tun";
            return;
        }
        ran = true;
        body(*tun);
    });
    t.join();
    if (!ran) MESSAGE("skipped: " << why);
    return ran;
}


// The next record the pipeline sent, whole (nullopt after 5 s without one).
inline std::optional<Bytes> next_record(gnutls_session_t server) {
    std::uint8_t buf[16384 + 256];
    const ssize_t n = gnutls_record_recv(server, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    return Bytes(buf, buf + n);
}

// A UDP socket in the namespace, connected from 10.9.0.1 to 10.9.0.2:9999 (via
// the tun), that refuses to fragment (DF set, path MTU learned from ICMP).
inline int udp_df_socket() {
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int pmtu = IP_PMTUDISC_DO;
    REQUIRE(::setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0);
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(9999);
    ::inet_pton(AF_INET, "10.9.0.2", &peer.sin_addr);
    REQUIRE(::connect(s, reinterpret_cast<sockaddr*>(&peer), sizeof peer) == 0);
    return s;
}

// The path MTU the kernel knows for a udp_df_socket's peer.
inline int path_mtu(int s) {
    int mtu = 0;
    socklen_t len = sizeof mtu;
    if (::getsockopt(s, IPPROTO_IP, IP_MTU, &mtu, &len) != 0) return -1;
    return mtu;
}

// The socket's pending error (taken: the next send goes through again).
inline int socket_error(int s) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    return err;
}

// Waits (bounded: 5 s) until `ok()`; returns its last value.
inline bool eventually(const std::function<bool()>& ok) {
    for (int i = 0; i < 500; ++i) {
        if (ok()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ok();
}

}  // namespace espvpn::test
