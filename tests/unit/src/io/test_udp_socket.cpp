// UdpSocket on loopback (no privileges needed): batches, GSO/GRO and the
// mapping of ICMP errors to drop counters.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "protocols/tunnel/tunnel_config.h"
#include "src/io/rtnetlink.h"
#include "src/io/udp_socket.h"

using namespace espvpn::io;
using espvpn::IpPrefix;

namespace {
// A receiver on an ephemeral loopback port and a sender connected to it (defaults: GSO/GRO on).
struct LoopbackPair {
    espvpn::Result<UdpSocket> rx, tx;
};
LoopbackPair loopback_pair() {
    UdpOptions ro;
    ro.local = "127.0.0.1:0";
    auto rx = UdpSocket::open(ro);
    REQUIRE(rx.ok());
    UdpOptions to;
    to.remote = rx->local_address()->to_string();
    auto tx = UdpSocket::open(to);
    REQUIRE(tx.ok());
    return {std::move(rx), std::move(tx)};
}
}  // namespace

TEST_CASE("SocketAddress and InterfaceAddress parse and reject with a reason") {
    auto v4 = SocketAddress::parse("127.0.0.1:4501");
    REQUIRE(v4.ok());
    CHECK(v4->to_string() == "127.0.0.1:4501");
    auto v6 = SocketAddress::parse("[::1]:443");
    REQUIRE(v6.ok());
    CHECK(v6->to_string() == "[::1]:443");
    CHECK_FALSE(SocketAddress::parse("::1:443").ok());
    CHECK(SocketAddress::parse("1.2.3.4").error().message.find("no port") != std::string::npos);
    CHECK_FALSE(SocketAddress::parse("1.2.3.4:70000").ok());
    CHECK_FALSE(SocketAddress::parse("host.example:80").ok());
    CHECK_FALSE(SocketAddress::parse("[::1]443").ok());

    auto p = InterfaceAddress::parse("10.0.0.2/24");
    REQUIRE(p.ok());
    CHECK(p->to_string() == "10.0.0.2/24");
    CHECK(InterfaceAddress::parse("fd00::1")->prefix_len == 128);
    CHECK(InterfaceAddress::parse("10.0.0.1")->prefix_len == 32);
    CHECK_FALSE(InterfaceAddress::parse("10.0.0.1/33").ok());
    CHECK_FALSE(InterfaceAddress::parse("fd00::1/129").ok());
    CHECK_FALSE(InterfaceAddress::parse("10.0.0.1/x").ok());
    CHECK(InterfaceAddress::parse("10.0.0/8").error().message.find("10.0.0") != std::string::npos);
}

TEST_CASE("InterfaceAddress::parse is the one prefix grammar with the host bits kept") {
    // The same text as an IpPrefix loses its host bits; as an interface address it keeps them.
    auto a = InterfaceAddress::parse("10.99.5.7/255.255.255.0");
    REQUIRE(a.ok());
    CHECK(a->to_string() == "10.99.5.7/24");
    CHECK(IpPrefix::parse("10.99.5.7/255.255.255.0")->to_string() == "10.99.5.0/24");
    auto b = InterfaceAddress::parse("fd00:1:2:3::5/64");
    REQUIRE(b.ok());
    CHECK(b->family == AF_INET6);
    CHECK(b->to_string() == "fd00:1:2:3::5/64");
    CHECK(InterfaceAddress::parse("0.0.0.0/0")->prefix_len == 0);
    // What IpPrefix refuses, an interface address refuses, with the same reason.
    for (const char* bad : {"10.0.0.1/255.0.255.0", "10.0.0.1/", "10.0.0.1/-1", "10.0.0.1/0024", "fd00::1/1.2.3.4",
                            "10.0.0.1/24/1", "nonsense", ""}) {
        INFO(bad);
        auto r = InterfaceAddress::parse(bad);
        REQUIRE_FALSE(r.ok());
        CHECK("route " + r.error().message == IpPrefix::parse(bad).error().message);
    }
}

TEST_CASE("endpoint_text: what SocketAddress::parse reads back, IPv6 in brackets; any_endpoint_like keeps the family") {
    CHECK(endpoint_text("10.201.0.1", 4501) == "10.201.0.1:4501");
    CHECK(endpoint_text("fd00:201::1", 4501) == "[fd00:201::1]:4501");
    auto back = SocketAddress::parse(endpoint_text("fd00:201::1", 4501));
    REQUIRE(back.ok());
    CHECK(back->family() == AF_INET6);
    CHECK(back->to_string() == "[fd00:201::1]:4501");
    CHECK(any_endpoint_like("fd00:201::1", 4555) == "[::]:4555");
    CHECK(any_endpoint_like("10.201.0.1", 4555) == "0.0.0.0:4555");
    CHECK(SocketAddress::parse(any_endpoint_like("fd00:201::1", 0))->family() == AF_INET6);
}

TEST_CASE("UdpSocket: a batch over loopback arrives whole, with or without offload") {
    for (bool offload : {true, false}) {
        UdpOptions ro;
        ro.local = "127.0.0.1:0";
        ro.gro = offload;
        auto rx = UdpSocket::open(ro);
        REQUIRE(rx.ok());
        UdpOptions to;
        to.remote = rx->local_address()->to_string();
        to.gso = offload;
        auto tx = UdpSocket::open(to);
        REQUIRE(tx.ok());
        PacketBatch out({20, 1500, 16, 16});
        for (int i = 0; i < 20; ++i) {
            auto room = out.next_room();
            std::fill(room.begin(), room.begin() + 1000, std::uint8_t(i));
            out.commit(i == 19 ? 10 : 1000);
        }
        SendOutcome s = tx->send_batch(out);
        CHECK(s.status == SendStatus::ok);
        CHECK(s.sent == 20);
        PacketBatch in({32, 1500, 16, 16});
        for (int tries = 0; tries < 50 && in.size() < 20; ++tries) {
            if (rx->wait_readable(100)) REQUIRE(rx->recv_batch(in).ok());
        }
        REQUIRE(in.size() == 20);
        for (int i = 0; i < 20; ++i) {
            CHECK(in.length(i) == (i == 19 ? 10u : 1000u));
            CHECK(in.packet(i)[0] == i);
        }
        if (offload && tx->gso()) CHECK(tx->counters().gso_messages == 1);
    }
}

TEST_CASE("UdpSocket: ICMP port unreachable is counted as a drop, not a failure") {
    // A port nobody listens on: bind one, note it, close it.
    std::string dead;
    {
        UdpOptions o;
        o.local = "127.0.0.1:0";
        auto s = UdpSocket::open(o);
        REQUIRE(s.ok());
        dead = s->local_address()->to_string();
    }
    UdpOptions o;
    o.remote = dead;
    auto tx = UdpSocket::open(o);
    REQUIRE(tx.ok());
    PacketBatch out({1, 100, 0, 0});
    out.next_room()[0] = 1;
    out.commit(1);
    SendOutcome last;
    for (int i = 0; i < 20 && last.status != SendStatus::unreachable; ++i) {
        last = tx->send_batch(out);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(last.status == SendStatus::unreachable);
    CHECK(tx->counters().drop_unreachable >= 1);

    UdpOptions none;
    CHECK_FALSE(UdpSocket::open(none).ok());
    UdpOptions mixed;
    mixed.local = "127.0.0.1:0";
    mixed.remote = "[::1]:9";
    CHECK(UdpSocket::open(mixed).error().message.find("family") != std::string::npos);
}

TEST_CASE("UdpSocket: any other send error drops each refused datagram, counted with its errno") {
    UdpOptions o;
    o.local = "127.0.0.1:0";
    auto tx = UdpSocket::open(o);
    REQUIRE(tx.ok());
    PacketBatch out({2, 100, 0, 0});
    for (int i = 0; i < 2; ++i) {
        out.next_room()[0] = static_cast<std::uint8_t>(i);
        out.commit(1);
    }
    tx->set_peer(*SocketAddress::parse("255.255.255.255:9"));  // broadcast without SO_BROADCAST: EACCES
    const SendOutcome first = tx->send_batch(out);
    CHECK(first.status == SendStatus::error);
    CHECK(first.error == EACCES);
    CHECK(tx->counters().drop_other == 2);
    CHECK(tx->counters().last_send_error == EACCES);
    CHECK(tx->counters().sent == 0);
}

TEST_CASE("UdpSocket: a batch with views gets GRO buffers received in place, leftovers on the next calls") {
    auto [rx, tx] = loopback_pair();
    PacketBatch out({20, 1500, 16, 16});
    for (int i = 0; i < 20; ++i) {
        auto room = out.next_room();
        std::fill(room.begin(), room.begin() + 1000, std::uint8_t(i));
        out.commit(i == 19 ? 10 : 1000);
    }
    REQUIRE(tx->send_batch(out).sent == 20);
    REQUIRE(rx->wait_readable(1000));

    // 2 slots of 64 KiB and 6 more entries: 8 packets per call at most.
    PacketBatch in({2, 65536, 16, 0, 6});
    std::vector<int> seen;
    for (int tries = 0; tries < 50 && seen.size() < 20; ++tries) {
        in.clear();
        if (!rx->wait_readable(100)) continue;
        REQUIRE(rx->recv_batch(in).ok());
        CHECK(in.size() <= 8);
        for (std::size_t i = 0; i < in.size(); ++i) {
            seen.push_back(in.packet(i)[0]);
            CHECK(in.length(i) == (in.packet(i)[0] == 19 ? 10u : 1000u));
            if (rx->gro()) {
                // The packet is a view into one of the batch's own slots, not a copy.
                auto s0 = in.storage(0), s1 = in.storage(1);
                const std::uint8_t* p = in.packet(i).data();
                CHECK(((p >= s0.data() && p < s0.data() + s0.size()) || (p >= s1.data() && p < s1.data() + s1.size())));
                CHECK(in.front_room(i) == 0);
                CHECK(in.back_room(i) == 0);
            }
        }
    }
    REQUIRE(seen.size() == 20);
    for (int i = 0; i < 20; ++i) CHECK(seen[static_cast<std::size_t>(i)] == i);
    if (rx->gro() && tx->gso()) CHECK(rx->counters().gro_buffers >= 1);
}

TEST_CASE("UdpSocket: in-place GRO receive hands out every datagram exactly once, whatever the batch size") {
    for (std::size_t views : {0u, 1u, 7u, 61u}) {
        auto [rx, tx] = loopback_pair();
        // 6 sends of 40 numbered datagrams (GSO messages when the kernel has it).
        constexpr std::uint32_t kSends = 6, kPerSend = 40;
        PacketBatch out({kPerSend, 1500, 16, 16});
        for (std::uint32_t s = 0; s < kSends; ++s) {
            out.clear();
            for (std::uint32_t i = 0; i < kPerSend; ++i) {
                auto room = out.next_room();
                const std::uint32_t n = s * kPerSend + i;
                std::memcpy(room.data(), &n, sizeof n);
                out.commit(i + 1 == kPerSend ? 300 : 1200);
            }
            REQUIRE(tx->send_batch(out).sent == kPerSend);
        }
        PacketBatch in({2, 65536, 16, 0, views});
        std::vector<std::uint32_t> seen;
        for (int tries = 0; tries < 400 && seen.size() < kSends * kPerSend; ++tries) {
            in.clear();
            if (!rx->wait_readable(100)) continue;
            REQUIRE(rx->recv_batch(in).ok());
            for (std::size_t i = 0; i < in.size(); ++i) {
                std::uint32_t n = 0;
                std::memcpy(&n, in.packet(i).data(), sizeof n);
                seen.push_back(n);
            }
        }
        CAPTURE(views);
        REQUIRE(seen.size() == kSends * kPerSend);
        for (std::uint32_t n = 0; n < kSends * kPerSend; ++n) CHECK(seen[n] == n);
        CHECK_FALSE(rx->wait_readable(0));
    }
}
