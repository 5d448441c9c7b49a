// DtlsChannel against a GnuTLS DTLS server session in this process, over
// loopback UDP (no root): PSK and legacy handshakes, the App-ID / Session-ID in
// the ClientHello, batch seal/open both ways, replayed and forged datagrams,
// the MTU rules, the header parsers, and the DTLS datapath in session mode
// (batches from the caller, packets to a deliver function, DPD both ways).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/dtls.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/datapath/dtls/dtls_datapath.h"
#include "src/io/dtls_channel.h"
#include "src/io/udp_socket.h"
#include "tests/unit/src/datapath/tun_tls_harness.h"

using namespace espvpn;
using namespace espvpn::io;

namespace {

std::vector<unsigned char> g_psk(32, 0x42);
int psk_for(gnutls_session_t, const char* username, gnutls_datum_t* key) {
    if (std::strcmp(username, "psk") != 0) return -1;
    key->data = static_cast<unsigned char*>(gnutls_malloc(g_psk.size()));
    std::memcpy(key->data, g_psk.data(), g_psk.size());
    key->size = static_cast<unsigned>(g_psk.size());
    return 0;
}

// A loopback UDP server socket, a connected UdpSocket for the channel, and a
// GnuTLS server session handshaking in a thread.
struct Peer {
    int fd = -1;
    UdpSocket client;
    gnutls_session_t server = nullptr;
    gnutls_psk_server_credentials_t pcred = nullptr;
    gnutls_certificate_credentials_t xcred = nullptr;
    std::vector<unsigned char> hello_session_id;
    std::thread thread;
    std::atomic<int> server_rc{1};

    static UdpSocket open_client(int server_fd) {
        sockaddr_in a{};
        socklen_t len = sizeof a;
        ::getsockname(server_fd, reinterpret_cast<sockaddr*>(&a), &len);
        UdpOptions o;
        o.remote = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
        return UdpSocket::open(o).value();
    }
    static int open_server() {
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        return s;
    }

    Peer() : fd(open_server()), client(open_client(fd)) {
        auto local = client.local_address().value();
        REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&local.storage), local.length) == 0);
        REQUIRE(gnutls_init(&server, GNUTLS_SERVER | GNUTLS_DATAGRAM) == 0);
        gnutls_transport_set_int(server, fd);
        gnutls_dtls_set_timeouts(server, 300, 5000);
    }
    void psk_server(const char* priority = "NORMAL:-VERS-ALL:-KX-ALL:+PSK:+VERS-DTLS-ALL") {
        REQUIRE(gnutls_priority_set_direct(server, priority, nullptr) == 0);
        gnutls_psk_allocate_server_credentials(&pcred);
        gnutls_psk_set_server_credentials_function(pcred, psk_for);
        gnutls_credentials_set(server, GNUTLS_CRD_PSK, pcred);
    }
    void legacy_server(const DtlsLegacyMode& m) {
        const std::string prio = std::string(m.suite->priority) + ":%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION";
        REQUIRE(gnutls_priority_set_direct(server, prio.c_str(), nullptr) == 0);
        const gnutls_datum_t master{const_cast<unsigned char*>(m.master_secret.reveal().data()), 48};
        const gnutls_datum_t sid{const_cast<unsigned char*>(m.session_id.data()), 32};
        REQUIRE(gnutls_session_set_premaster(server, GNUTLS_SERVER, m.suite->version, m.suite->kx, m.suite->cipher,
                                             m.suite->mac, GNUTLS_COMP_NULL, &master, &sid) == 0);
        gnutls_certificate_allocate_credentials(&xcred);
        gnutls_credentials_set(server, GNUTLS_CRD_CERTIFICATE, xcred);
    }
    void start() {
        thread = std::thread([this] {
            unsigned char buf[2048];
            const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK);  // the ClientHello, left queued
            if (n > 60 && buf[0] == 22) hello_session_id.assign(buf + 60, buf + 60 + std::min<int>(buf[59], n - 60));
            int rc;
            do rc = gnutls_handshake(server);
            while (rc < 0 && !gnutls_error_is_fatal(rc));
            server_rc = rc;
        });
    }
    void join() {
        if (thread.joinable()) thread.join();
    }
    ~Peer() {
        join();
        gnutls_deinit(server);
        if (pcred) gnutls_psk_free_server_credentials(pcred);
        if (xcred) gnutls_certificate_free_credentials(xcred);
        ::close(fd);
    }
};

PacketBatch make_packets(std::size_t count, std::size_t size) {
    PacketBatch b({count, 2048, 16, 0});
    for (std::size_t i = 0; i < count; ++i) {
        auto room = b.next_room();
        room[0] = 0x00;  // data
        room[1] = 0x45;
        for (std::size_t k = 2; k < size; ++k) room[k] = static_cast<std::uint8_t>(i + k);
        b.commit(size);
    }
    return b;
}

// Reads whatever the server socket holds into a batch (as recv_batch would).
PacketBatch receive_all(int fd, std::size_t max) {
    PacketBatch b({max, 2048, 0, 0});
    while (!b.full()) {
        auto room = b.next_room();
        const ssize_t n = ::recv(fd, room.data(), room.size(), MSG_DONTWAIT);
        if (n <= 0) break;
        b.commit(static_cast<std::size_t>(n));
    }
    return b;
}

// A DTLS PSK server that, like ocserv's worker, steps its handshake only when a datagram
// arrives (it never retransmits on a timer of its own) and whose `lost`-th datagram (1: the
// ServerHello, 2: the ServerHelloDone of its first flight) is lost on the way, once.
struct AnswerOnlyServer {
    int fd = -1;
    int lost = 0;
    int sent = 0;
    gnutls_session_t session = nullptr;
    gnutls_psk_server_credentials_t cred = nullptr;
    std::atomic<int> rc{1};
    std::atomic<bool> stop{false};
    std::thread thread;

    static ssize_t push(gnutls_transport_ptr_t p, const void* data, size_t size) {
        auto* self = static_cast<AnswerOnlyServer*>(p);
        if (++self->sent == self->lost) return static_cast<ssize_t>(size);
        return ::send(self->fd, data, size, 0);
    }
    // The epoch 0 record sequence numbers the client sent (a repeated one is dropped as a replay).
    std::vector<std::uint64_t> epoch0_seqs;
    static ssize_t pull(gnutls_transport_ptr_t p, void* data, size_t size) {
        auto* self = static_cast<AnswerOnlyServer*>(p);
        const ssize_t n = ::recv(self->fd, data, size, MSG_DONTWAIT);
        const auto* b = static_cast<const std::uint8_t*>(data);
        for (ssize_t at = 0; n > 0 && at + 13 <= n; at += 13 + (b[at + 11] << 8 | b[at + 12])) {
            if (b[at + 3] != 0 || b[at + 4] != 0) continue;
            std::uint64_t seq = 0;
            for (int i = 5; i < 11; ++i) seq = seq << 8 | b[at + i];
            self->epoch0_seqs.push_back(seq);
        }
        return n;
    }
    static int pull_timeout(gnutls_transport_ptr_t p, unsigned int) {
        pollfd pf{static_cast<AnswerOnlyServer*>(p)->fd, POLLIN, 0};
        return ::poll(&pf, 1, 0);
    }
    AnswerOnlyServer(int server_fd, int lost_datagram) : fd(server_fd), lost(lost_datagram) {
        REQUIRE(gnutls_init(&session, GNUTLS_SERVER | GNUTLS_DATAGRAM | GNUTLS_NONBLOCK) == 0);
        REQUIRE(gnutls_priority_set_direct(session, "NORMAL:-VERS-ALL:-KX-ALL:+PSK:+VERS-DTLS1.2", nullptr) == 0);
        gnutls_psk_allocate_server_credentials(&cred);
        gnutls_psk_set_server_credentials_function(cred, psk_for);
        gnutls_credentials_set(session, GNUTLS_CRD_PSK, cred);
        gnutls_transport_set_ptr(session, this);
        gnutls_transport_set_push_function(session, push);
        gnutls_transport_set_pull_function(session, pull);
        gnutls_transport_set_pull_timeout_function(session, pull_timeout);
        gnutls_dtls_set_timeouts(session, 200, 20000);
        thread = std::thread([this] {
            while (!stop) {
                pollfd pf{fd, POLLIN, 0};
                if (::poll(&pf, 1, 50) <= 0) continue;  // no timer: only an arrival moves it
                const int r = gnutls_handshake(session);
                if (r == 0 || gnutls_error_is_fatal(r)) {
                    rc = r;
                    return;
                }
            }
        });
    }
    ~AnswerOnlyServer() {
        stop = true;
        if (thread.joinable()) thread.join();
        gnutls_deinit(session);
        gnutls_psk_free_server_credentials(cred);
    }
};

}  // namespace

// faults_ac_netem's failure (5 % loss): GnuTLS's client took the ServerHello as the
// acknowledgement of its ClientHello and stopped retransmitting; ocserv, which answers only
// what it hears, never sent the lost ServerHelloDone again: the handshake hung until its
// timeout, and the next attempt came a minute later.
TEST_CASE("PSK mode: a datagram of the server's answer lost, a server that only answers: the client resends") {
    for (int lost : {1, 2}) {
        CAPTURE(lost);
        Peer peer;  // its sockets only: the server session here is AnswerOnlyServer's
        AnswerOnlyServer server(peer.fd, lost);
        DtlsPskMode psk;
        psk.psk = Secret(std::span<const std::uint8_t>(g_psk.data(), g_psk.size()));
        psk.app_id.assign(32, 0x11);
        DtlsChannelOptions o;
        o.mode = std::move(psk);
        o.retransmit = std::chrono::milliseconds(100);
        o.handshake_timeout = std::chrono::milliseconds(10000);
        auto ch = DtlsChannel::create(peer.client.fd(), std::move(o));
        REQUIRE(ch);
        Status hs = (*ch)->handshake();
        REQUIRE_MESSAGE(hs, (hs ? "" : hs.error().message));
        CHECK((*ch)->established());
        // The server ends its handshake on our Finished; the wait is bounded, not timed.
        for (int i = 0; i < 500 && server.rc == 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        CHECK(server.rc == 0);
        // The resent flight was renumbered and GnuTLS numbered on past it: no sequence number twice.
        server.stop = true;
        server.thread.join();
        std::vector<std::uint64_t> seqs = server.epoch0_seqs;
        CHECK(seqs.size() >= 4);  // ClientHello, its resend, ClientKeyExchange, ChangeCipherSpec
        std::sort(seqs.begin(), seqs.end());
        CHECK(std::adjacent_find(seqs.begin(), seqs.end()) == seqs.end());
    }
}

TEST_CASE("PSK mode: App-ID in the ClientHello, records both ways, forged and replayed datagrams dropped") {
    Peer peer;
    peer.psk_server();
    DtlsPskMode psk;
    psk.psk = Secret(std::span<const std::uint8_t>(g_psk.data(), g_psk.size()));
    psk.app_id.assign(32, 0);
    for (std::size_t i = 0; i < 32; ++i) psk.app_id[i] = static_cast<std::uint8_t>(0xa0 + i);
    const std::vector<unsigned char> app_id(psk.app_id.begin(), psk.app_id.end());
    DtlsChannelOptions o;
    o.mode = std::move(psk);
    o.base_mtu = 1500;
    auto ch = DtlsChannel::create(peer.client.fd(), std::move(o));
    REQUIRE(ch);
    peer.start();
    Status hs = (*ch)->handshake();
    peer.join();
    REQUIRE_MESSAGE(hs, (hs ? "" : hs.error().message));
    REQUIRE(peer.server_rc == 0);
    CHECK(peer.hello_session_id == app_id);
    DtlsChannel& c = **ch;
    CHECK(c.established());
    CHECK(!c.resumed());
    CHECK(c.description().find("PSK") != std::string::npos);
    CHECK(c.tunnel_mtu() + 1 == c.record_payload_mtu());
    CHECK(c.tunnel_mtu() >= 1400);
    CHECK(c.tunnel_mtu() <= 1472 - 1 - 13);
    CHECK(c.records_ours());

    // client -> server: one batch, one record per packet, each decrypts to its packet
    PacketBatch plain = make_packets(8, 1000);
    PacketBatch records({16, 2048, 0, 0});
    DtlsSealOutcome sealed = c.seal_batch(plain, records);
    CHECK(sealed.records == 8);
    CHECK(records.size() == 8);
    // Ours number past GnuTLS's, which may still send a handshake retransmission.
    std::uint64_t first_seq = 0;
    for (int k = 5; k < 11; ++k) first_seq = first_seq << 8 | records.packet(0)[k];
    CHECK(first_seq >= (std::uint64_t{1} << 16));
    for (std::size_t i = 0; i < records.size(); ++i) {
        REQUIRE(::send(peer.client.fd(), records.packet(i).data(), records.length(i), 0) ==
                static_cast<ssize_t>(records.length(i)));
    }
    unsigned char buf[4096];
    for (std::size_t i = 0; i < 8; ++i) {
        const ssize_t n = gnutls_record_recv(peer.server, buf, sizeof buf);
        REQUIRE(n == 1000);
        CHECK(std::memcmp(buf, plain.packet(i).data(), 1000) == 0);
    }
    // too big for a record: counted, not sent
    PacketBatch big = make_packets(1, c.record_payload_mtu() + 1 <= 2048 ? c.record_payload_mtu() + 1 : 2048);
    records.clear();
    CHECK(c.seal_batch(big, records).too_big == 1);
    CHECK(records.size() == 0);

    // server -> client: batch open, plus a replayed and a forged datagram
    for (std::size_t i = 0; i < 5; ++i) REQUIRE(gnutls_record_send(peer.server, plain.packet(i).data(), 700) == 700);
    PacketBatch in = receive_all(peer.client.fd(), 16);
    REQUIRE(in.size() == 5);
    {
        auto room = in.next_room();  // a replay of the first record
        std::memcpy(room.data(), in.packet(0).data(), in.length(0));
        in.commit(in.length(0));
        room = in.next_room();  // the second record with a flipped ciphertext byte
        std::memcpy(room.data(), in.packet(1).data(), in.length(1));
        room[in.length(1) - 3] ^= 1;
        in.commit(in.length(1));
        room = in.next_room();  // not DTLS at all
        std::memset(room.data(), 0x99, 40);
        in.commit(40);
    }
    PacketBatch out({3, 2048, 16, 0});  // smaller than the input: open_batch must resume
    std::size_t opened = 0, discarded = 0, datagrams = 0;
    for (int call = 0; call < 10; ++call) {
        out.clear();
        auto r = c.open_batch(in, out);
        REQUIRE(r);
        for (std::size_t i = 0; i < out.size(); ++i) {
            REQUIRE(out.length(i) == 700);
            CHECK(std::memcmp(out.packet(i).data(), plain.packet(opened + i).data(), 700) == 0);
        }
        opened += r->records;
        discarded += r->discarded;
        datagrams += r->datagrams;
        if (!r->more) break;
    }
    CHECK(opened == 5);
    CHECK(datagrams == 8);
    CHECK(discarded == 3);

    // send_record goes straight to the socket
    const std::uint8_t dpd[] = {0x03};
    REQUIRE(c.send_record(dpd));
    CHECK(gnutls_record_recv(peer.server, buf, sizeof buf) == 1);
    CHECK(buf[0] == 0x03);

    // An alert is GnuTLS's to read: a warning is a discard, data around it still opens,
    // close_notify ends the channel.
    REQUIRE(gnutls_record_send(peer.server, plain.packet(0).data(), 700) == 700);
    REQUIRE(gnutls_alert_send(peer.server, GNUTLS_AL_WARNING, GNUTLS_A_USER_CANCELED) == 0);
    REQUIRE(gnutls_record_send(peer.server, plain.packet(1).data(), 700) == 700);
    REQUIRE(gnutls_bye(peer.server, GNUTLS_SHUT_WR) == 0);
    in = receive_all(peer.client.fd(), 16);
    REQUIRE(in.size() == 4);
    out.clear();
    auto r = c.open_batch(in, out);
    REQUIRE(r);
    CHECK(r->records == 2);
    CHECK(r->discarded == 1);
    CHECK(r->peer_closed);
    CHECK(std::memcmp(out.packet(1).data(), plain.packet(1).data(), 700) == 0);
}

// Both ends' handshakes stepped in turn (both are non-blocking), bounded in steps.
struct EndsOutcome {
    Status client, server;
};
EndsOutcome handshake_both(DtlsChannel& client, DtlsChannel& server) {
    EndsOutcome o;
    bool client_done = false, server_done = false;
    for (int step = 0; step < 4000 && (!client_done || !server_done); ++step) {
        if (!client_done && o.client) {
            auto r = client.handshake_step();
            if (!r) o.client = r.error();
            else client_done = *r;
        }
        if (!server_done && o.server) {
            auto r = server.handshake_step();
            if (!r) o.server = r.error();
            else server_done = *r;
        }
        if (!o.client || !o.server) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (o.client && !client_done) o.client = make_error("client handshake did not finish");
    if (o.server && !server_done) o.server = make_error("server handshake did not finish");
    return o;
}

// A PSK client channel on client_fd and our server end (DtlsPskServerMode, server_key) on
// server_fd, handshaken against each other.
struct PskEnds {
    std::unique_ptr<DtlsChannel> client, server;
    EndsOutcome hs;
};
PskEnds psk_ends(int client_fd, int server_fd, const std::vector<std::uint8_t>& server_key) {
    DtlsPskMode cm;
    cm.psk = Secret(std::span<const std::uint8_t>(g_psk.data(), g_psk.size()));
    cm.app_id.assign(32, 0x5a);
    DtlsChannelOptions co;
    co.mode = std::move(cm);
    co.retransmit = std::chrono::milliseconds(100);
    co.handshake_timeout = std::chrono::milliseconds(3000);
    DtlsChannelOptions so;
    so.mode = DtlsPskServerMode{Secret(std::span<const std::uint8_t>(server_key.data(), server_key.size()))};
    so.retransmit = co.retransmit;
    so.handshake_timeout = co.handshake_timeout;
    auto client = DtlsChannel::create(client_fd, std::move(co));
    REQUIRE(client);
    REQUIRE((*client)->handshake_step());  // the ClientHello goes out first
    auto server = DtlsChannel::create(server_fd, std::move(so));
    REQUIRE(server);
    PskEnds e{std::move(*client), std::move(*server), {}};
    e.hs = handshake_both(*e.client, *e.server);
    return e;
}

TEST_CASE("The server end (DtlsPskServerMode): our records both ways with our client; a wrong PSK fails the handshake") {
    for (const bool same_key : {true, false}) {
        CAPTURE(same_key);
        const int server_fd = Peer::open_server();
        UdpSocket client_udp = Peer::open_client(server_fd);
        auto local = client_udp.local_address().value();
        REQUIRE(::connect(server_fd, reinterpret_cast<const sockaddr*>(&local.storage), local.length) == 0);
        REQUIRE(::fcntl(server_fd, F_SETFL, O_NONBLOCK) == 0);  // as a UdpSocket's: the channel never blocks
        std::vector<std::uint8_t> server_key = g_psk;
        if (!same_key) server_key[0] ^= 1;
        PskEnds ends = psk_ends(client_udp.fd(), server_fd, server_key);
        auto& client = ends.client;
        auto& server = ends.server;
        const EndsOutcome& hs = ends.hs;
        if (!same_key) {
            CHECK(!(hs.client && hs.server));  // one end sees the bad Finished, in bounded time
            ::close(server_fd);
            continue;
        }
        REQUIRE_MESSAGE(hs.client, (hs.client ? "" : hs.client.error().message));
        REQUIRE_MESSAGE(hs.server, (hs.server ? "" : hs.server.error().message));
        DtlsChannel& c = *client;
        DtlsChannel& s = *server;
        CHECK(c.records_ours());
        CHECK(s.records_ours());
        CHECK(s.record_payload_mtu() == c.record_payload_mtu());  // the same base MTU gives both ends one MTU
        CHECK(s.description() == c.description());

        // each way: sealed by one end's sealer, opened by the other's opener
        for (const bool client_sends : {true, false}) {
            DtlsChannel& from = client_sends ? c : s;
            DtlsChannel& to = client_sends ? s : c;
            PacketBatch plain = make_packets(6, 1200);
            PacketBatch records({8, 2048, 0, 0});
            REQUIRE(from.seal_batch(plain, records).records == 6);
            for (std::size_t i = 0; i < records.size(); ++i)
                REQUIRE(::send(from.fd(), records.packet(i).data(), records.length(i), 0) ==
                        static_cast<ssize_t>(records.length(i)));
            PacketBatch in = receive_all(to.fd(), 8);
            REQUIRE(in.size() == 6);
            PacketBatch out({8, 2048, 16, 0});
            auto r = to.open_batch(in, out);
            REQUIRE(r);
            CHECK(r->records == 6);
            CHECK(r->discarded == 0);
            for (std::size_t i = 0; i < out.size(); ++i) {
                REQUIRE(out.length(i) == 1200);
                CHECK(std::memcmp(out.packet(i).data(), plain.packet(i).data(), 1200) == 0);
            }
        }
        client.reset();
        server.reset();
        ::close(server_fd);
    }
}

// The receive side of the datapath with UDP GRO: records sent with UDP GSO over loopback
// reach the client's GRO socket as coalesced buffers; the rx pipeline opens them where
// recvmmsg put them (views of its slots) and delivers every packet, in order, intact.
TEST_CASE("DTLS datapath: records arriving in UDP GRO buffers are all delivered, in order") {
    UdpOptions so_udp;
    so_udp.local = "127.0.0.1:0";
    auto server_udp = UdpSocket::open(so_udp);
    REQUIRE(server_udp);
    auto server_local = server_udp->local_address().value();
    UdpOptions co_udp;
    co_udp.remote = "127.0.0.1:" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in&>(server_local.storage).sin_port));
    auto client_udp = UdpSocket::open(co_udp);
    REQUIRE(client_udp);
    const auto client_local = client_udp->local_address().value();
    REQUIRE(::connect(server_udp->fd(), reinterpret_cast<const sockaddr*>(&client_local.storage),
                      client_local.length) == 0);
    server_udp->set_peer(client_local);

    PskEnds ends = psk_ends(client_udp->fd(), server_udp->fd(), g_psk);
    auto& client = ends.client;
    auto& server = ends.server;
    REQUIRE_MESSAGE(ends.hs.client, (ends.hs.client ? "" : ends.hs.client.error().message));
    REQUIRE_MESSAGE(ends.hs.server, (ends.hs.server ? "" : ends.hs.server.error().message));
    REQUIRE(server->records_ours());

    std::mutex m;
    std::vector<std::vector<std::uint8_t>> delivered;
    datapath::DtlsDatapathOptions dopt;
    dopt.deliver = [&](PacketBatch& b) {
        std::lock_guard<std::mutex> lock(m);
        for (std::size_t i = 0; i < b.size(); ++i) delivered.emplace_back(b.packet(i).begin(), b.packet(i).end());
    };
    auto started = datapath::DtlsDatapath::start(nullptr, *client_udp, *client, dopt);
    REQUIRE(started);
    auto& dp = *started.value();

    // 4 batches of 40 equal-sized records (one GSO send each), then an odd-sized one.
    // Each packet is an IPv4 header's first byte, then its number and a pattern; the
    // datapath may coalesce nothing (not TCP), so every packet arrives as it was sent.
    constexpr std::size_t kBatches = 4, kPerBatch = 40, kSize = 1000;
    std::vector<std::vector<std::uint8_t>> sent;
    for (std::size_t b = 0; b < kBatches; ++b) {
        PacketBatch plain({kPerBatch + 1, 2048, 16, 0});
        for (std::size_t i = 0; i < kPerBatch + (b + 1 == kBatches ? 1 : 0); ++i) {
            const std::size_t size = i == kPerBatch ? kSize / 3 : kSize;
            auto room = plain.next_room();
            room[0] = 0x00;  // the AnyConnect DTLS data type
            room[1] = 0x45;
            const std::size_t n = sent.size();
            room[2] = static_cast<std::uint8_t>(n >> 8);
            room[3] = static_cast<std::uint8_t>(n);
            for (std::size_t k = 4; k < size; ++k) room[k] = static_cast<std::uint8_t>(n * 7 + k);
            plain.commit(size);
            sent.emplace_back(room.begin() + 1, room.begin() + static_cast<std::ptrdiff_t>(size));
        }
        PacketBatch records({kPerBatch + 1, 2048, 0, 0});
        REQUIRE(server->seal_batch(plain, records).records == plain.size());
        const auto out = server_udp->send_batch(records);
        REQUIRE(out.sent == records.size());
    }
    for (int t = 0; t < 500; ++t) {
        {
            std::lock_guard<std::mutex> lock(m);
            if (delivered.size() >= sent.size()) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    dp.stop();
    const datapath::DtlsDatapathStats st = dp.stats();
    std::lock_guard<std::mutex> lock(m);
    REQUIRE(delivered.size() == sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i) {
        CAPTURE(i);
        CHECK(delivered[i] == sent[i]);
    }
    CHECK(st.rx.records == sent.size());
    CHECK(st.drops() == 0);
    CHECK(st.rx.udp_gro_buffers > 0);  // the kernel did coalesce: the views path ran
    CHECK(server_udp->counters().gso_messages > 0);
}

TEST_CASE("Legacy mode resumes the agreed session (DTLS 1.2 GCM and DTLS 0.9 CBC)") {
    for (const char* name : {"OC-DTLS1_2-AES128-GCM", "AES128-SHA"}) {
        CAPTURE(name);
        Peer peer;
        DtlsLegacyMode m;
        m.master_secret = make_dtls_master_secret().value();
        m.session_id.assign(32, 0x77);
        m.suite = find_dtls_legacy_suite(name, false).value();
        m.tunnel_mtu = 1300;
        DtlsLegacyMode server_copy;
        server_copy.master_secret = m.master_secret.clone();
        server_copy.session_id = m.session_id;
        server_copy.suite = m.suite;
        peer.legacy_server(server_copy);
        DtlsChannelOptions o;
        o.mode = std::move(m);
        auto ch = DtlsChannel::create(peer.client.fd(), std::move(o));
        REQUIRE(ch);
        peer.start();
        Status hs = (*ch)->handshake();
        peer.join();
        REQUIRE_MESSAGE(hs, (hs ? "" : hs.error().message));
        CHECK((*ch)->resumed());
        CHECK(peer.hello_session_id == std::vector<unsigned char>(32, 0x77));
        CHECK((*ch)->tunnel_mtu() == 1300);  // X-DTLS-MTU, whatever CBC rounding allows
        PacketBatch plain = make_packets(2, 1301);
        PacketBatch records({4, 2048, 0, 0});
        CHECK((*ch)->seal_batch(plain, records).records == 2);
        CHECK((*ch)->records_ours() == (server_copy.suite->cipher != GNUTLS_CIPHER_AES_128_CBC));
        for (std::size_t i = 0; i < records.size(); ++i)
            REQUIRE(::send(peer.client.fd(), records.packet(i).data(), records.length(i), 0) ==
                    static_cast<ssize_t>(records.length(i)));
        unsigned char buf[4096];
        for (std::size_t i = 0; i < 2; ++i) {
            CHECK(gnutls_record_recv(peer.server, buf, sizeof buf) == 1301);
            CHECK(std::memcmp(buf, plain.packet(i).data(), 1301) == 0);
        }
        // and back
        REQUIRE(gnutls_record_send(peer.server, plain.packet(1).data(), 1000) == 1000);
        PacketBatch in = receive_all(peer.client.fd(), 4);
        PacketBatch out({4, 2048, 16, 0});
        auto r = (*ch)->open_batch(in, out);
        REQUIRE(r);
        REQUIRE(r->records == 1);
        REQUIRE(out.length(0) == 1000);
        CHECK(std::memcmp(out.packet(0).data(), plain.packet(1).data(), 1000) == 0);
    }
}

TEST_CASE("Channel options and CONNECT header values are checked with clear errors") {
    // X-DTLS-App-ID / X-DTLS-Session-ID are parsed with the CONNECT reply (test_ac_tunnel.cpp).
    CHECK(find_dtls_legacy_suite("AES256-SHA", false).value()->version == GNUTLS_DTLS0_9);
    CHECK(find_dtls_legacy_suite("AES256-SHA", true).value()->version == GNUTLS_DTLS1_2);
    CHECK(find_dtls_legacy_suite("AES256-GCM-SHA384", true));
    auto unknown = find_dtls_legacy_suite("DHE-RSA-AES128-SHA", false);
    REQUIRE(!unknown);
    CHECK(unknown.error().message == "unknown DTLS cipher suite 'DHE-RSA-AES128-SHA' in X-DTLS-CipherSuite");
    CHECK(dtls_legacy_suite_offer(false) == "OC-DTLS1_2-AES256-GCM:OC-DTLS1_2-AES128-GCM:AES256-SHA:AES128-SHA");
    CHECK(dtls_legacy_suite_offer(true) == "AES256-GCM-SHA384:AES128-GCM-SHA256:AES256-SHA:AES128-SHA");
    CHECK(make_dtls_master_secret().value().size() == 48);

    DtlsChannelOptions o;
    DtlsPskMode psk;
    psk.psk = Secret(16);
    psk.app_id.assign(32, 1);
    o.mode = std::move(psk);
    auto wrong_key = DtlsChannel::create(0, std::move(o));
    REQUIRE(!wrong_key);
    CHECK(wrong_key.error().message == "DTLS PSK must be 32 bytes, got 16");

    DtlsChannelOptions l;
    DtlsLegacyMode m;
    m.master_secret = Secret(48);
    m.session_id.assign(31, 0);
    m.suite = find_dtls_legacy_suite("AES128-SHA", false).value();
    m.tunnel_mtu = 1400;
    l.mode = std::move(m);
    auto wrong_sid = DtlsChannel::create(0, std::move(l));
    REQUIRE(!wrong_sid);
    CHECK(wrong_sid.error().message == "X-DTLS-Session-ID must be 32 bytes, got 31");
    CHECK(!DtlsChannel::create(-1, DtlsChannelOptions{}));
}

TEST_CASE("The PSK export needs a CSTP session") {
    auto none = export_dtls_psk(static_cast<gnutls_session_t>(nullptr));
    REQUIRE(!none);
    CHECK(none.error().message.find("no CSTP TLS session") != std::string::npos);
}

TEST_CASE("DTLS datapath in session mode: send batches, deliver data, answer DPD, count drops") {
    Peer peer;
    peer.psk_server();
    DtlsPskMode psk;
    psk.psk = Secret(std::span<const std::uint8_t>(g_psk.data(), g_psk.size()));
    psk.app_id.assign(32, 7);
    DtlsChannelOptions o;
    o.mode = std::move(psk);
    auto ch = DtlsChannel::create(peer.client.fd(), std::move(o));
    REQUIRE(ch);
    peer.start();
    REQUIRE((*ch)->handshake());
    peer.join();
    REQUIRE(peer.server_rc == 0);
    gnutls_record_set_timeout(peer.server, 3000);

    std::mutex m;
    std::vector<std::vector<std::uint8_t>> delivered;
    datapath::DtlsDatapathOptions dopt;
    dopt.deliver = [&](PacketBatch& b) {
        std::lock_guard<std::mutex> lock(m);
        for (std::size_t i = 0; i < b.size(); ++i) {
            CHECK(b.front_room(i) >= 16);
            delivered.emplace_back(b.packet(i).begin(), b.packet(i).end());
        }
    };
    CHECK(!datapath::DtlsDatapath::start(nullptr, peer.client, **ch, {}));  // received data needs a deliver function
    auto started = datapath::DtlsDatapath::start(nullptr, peer.client, **ch, dopt);
    REQUIRE(started);
    auto& dp = *started.value();

    // caller -> server: IP packets get the data type byte; a non-IP one is dropped
    PacketBatch batch({12, 1500, 16, 0});
    for (int i = 0; i < 11; ++i) {
        auto room = batch.next_room();
        std::memset(room.data(), i, 300);
        room[0] = i == 10 ? 0x20 : 0x45;
        batch.commit(300);
    }
    REQUIRE(dp.send(batch));
    unsigned char buf[4096];
    for (int i = 0; i < 10; ++i) {
        REQUIRE(gnutls_record_recv(peer.server, buf, sizeof buf) == 301);
        CHECK(buf[0] == 0x00);
        CHECK(buf[1] == 0x45);
        CHECK(buf[2] == i);
    }

    // server -> caller: data, a DPD request (answered with its payload), a keepalive, junk
    const unsigned char data_rec[] = {0x00, 0x45, 1, 2, 3, 4, 5, 6, 7};
    const unsigned char dpd_req[] = {0x03, 'a', 'b'};
    const unsigned char keepalive[] = {0x07};
    const unsigned char unknown[] = {0x42, 1};
    const unsigned char compressed[] = {0x08, 1};
    for (int i = 0; i < 3; ++i) REQUIRE(gnutls_record_send(peer.server, data_rec, sizeof data_rec) > 0);
    REQUIRE(gnutls_record_send(peer.server, dpd_req, sizeof dpd_req) > 0);
    REQUIRE(gnutls_record_send(peer.server, keepalive, 1) > 0);
    REQUIRE(gnutls_record_send(peer.server, unknown, 2) > 0);
    REQUIRE(gnutls_record_send(peer.server, compressed, 2) > 0);
    REQUIRE(gnutls_record_recv(peer.server, buf, sizeof buf) == 3);
    CHECK(buf[0] == 0x04);
    CHECK(buf[1] == 'a');
    CHECK(buf[2] == 'b');
    for (int t = 0; t < 200; ++t) {
        {
            std::lock_guard<std::mutex> lock(m);
            if (delivered.size() >= 3) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    {
        std::lock_guard<std::mutex> lock(m);
        REQUIRE(delivered.size() == 3);
        CHECK(delivered[0] == std::vector<std::uint8_t>(data_rec + 1, data_rec + sizeof data_rec));
    }

    // our DPD request, the server's answer, then a disconnect
    dp.send_dpd_request();
    REQUIRE(gnutls_record_recv(peer.server, buf, sizeof buf) == 1);
    CHECK(buf[0] == 0x03);
    const unsigned char dpd_resp[] = {0x04};
    const unsigned char bye[] = {0x05, 0xb0};
    REQUIRE(gnutls_record_send(peer.server, dpd_resp, 1) > 0);
    REQUIRE(gnutls_record_send(peer.server, bye, 2) > 0);
    for (int t = 0; t < 200 && !dp.liveness().peer_disconnected; ++t)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const datapath::DtlsLiveness l = dp.liveness();
    CHECK(l.peer_disconnected);
    CHECK(l.last_dpd_response.time_since_epoch().count() != 0);
    CHECK(l.last_rx.time_since_epoch().count() != 0);
    dp.stop();
    const datapath::DtlsDatapathStats st = dp.stats();
    CHECK(st.tx.inner_packets == 11);
    CHECK(st.tx.drop_not_ip == 1);
    CHECK(st.tx.dpd_responses_sent == 1);
    CHECK(st.tx.dpd_requests_sent == 1);
    CHECK(st.rx.records == 9);
    CHECK(st.rx.inner_packets == 3);
    CHECK(st.rx.dpd_requests == 1);
    CHECK(st.rx.dpd_responses == 1);
    CHECK(st.rx.keepalives == 1);
    CHECK(st.rx.disconnects == 1);
    CHECK(st.rx.drop_unknown_type == 1);
    CHECK(st.rx.drop_compressed == 1);
    CHECK(st.drops() == 3);
    CHECK(!dp.failure());
    CHECK(st.to_json().find("\"drop_compressed\": 1") != std::string::npos);
    CHECK(!dp.send(batch));  // stopped
}

// As for every pipeline: a packet above the tunnel MTU, read from the tun by its
// reader (the CSTP pump in the product) and handed to send(), is answered with
// ICMP "too big" into the tun, and the sender's kernel learns the path MTU.
TEST_CASE("DTLS datapath: oversized packets get ICMP too-big") {
    Peer peer;
    peer.psk_server();
    DtlsPskMode psk;
    psk.psk = Secret(std::span<const std::uint8_t>(g_psk.data(), g_psk.size()));
    psk.app_id.assign(32, 7);
    DtlsChannelOptions o;
    o.mode = std::move(psk);
    o.base_mtu = 1300;  // a tunnel MTU below the tun's 1400
    auto ch = DtlsChannel::create(peer.client.fd(), std::move(o));
    REQUIRE(ch);
    peer.start();
    REQUIRE((*ch)->handshake());
    peer.join();
    REQUIRE(peer.server_rc == 0);
    const std::size_t mtu = (*ch)->tunnel_mtu();
    REQUIRE(mtu < 1300);
    espvpn::test::in_private_netns([&](TunDevice& tun) {
        datapath::DtlsDatapathOptions dopt;
        dopt.deliver = [](PacketBatch&) {};
        auto started = datapath::DtlsDatapath::start(&tun, peer.client, **ch, dopt);
        REQUIRE(started);
        auto& dp = *started.value();
        const int s = espvpn::test::udp_df_socket();
        const std::string big(1300 - 28, 'b');  // fits the tun, not the tunnel
        REQUIRE(::send(s, big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
        PacketBatch batch(PacketBatchShape{64, 1400, 16, 0});
        bool read = false;
        for (int i = 0; i < 50 && !read; ++i) {  // past the kernel's own IPv6 chatter
            if (!tun.wait_readable(100)) continue;
            batch.clear();
            REQUIRE(tun.read_packets(batch));
            for (std::size_t k = 0; k < batch.size(); ++k) read = read || batch.length(k) == 1300;
        }
        REQUIRE(read);
        CHECK(dp.send(batch));
        CHECK(espvpn::test::eventually([&] { return espvpn::test::path_mtu(s) == static_cast<int>(mtu); }));
        CHECK(espvpn::test::socket_error(s) == EMSGSIZE);
        dp.stop();
        const datapath::DtlsDatapathStats st = dp.stats();
        CHECK(st.tx.drop_too_big == 1);
        CHECK(st.tx.icmp_too_big_sent == 1);
        ::close(s);
    });
}
