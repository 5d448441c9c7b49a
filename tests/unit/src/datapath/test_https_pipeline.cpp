// TlsPump with GP framing (the HTTPS tunnel) end to end on one machine: a tun device in a private network
// namespace (made by the test thread, gone with it), the pipeline on one end of
// a TLS session over a socketpair, the test playing the gateway on the other
// end. Needs root (tun + unshare); skipped otherwise.
#include "tests/unit/src/datapath/tun_tls_harness.h"

#include "src/datapath/tls/tls_pump.h"

using namespace espvpn;
using namespace espvpn::datapath;
using namespace espvpn::test;

namespace {

TlsFramedOptions options() { return gp_pump_options(1400); }

// The pump as the GP driver makes it (session/gp/tunnel.cpp).
std::unique_ptr<TlsPump> https_pump(TlsPair& tls, io::TunDevice& tun, const TlsFramedOptions& o) {
    return std::make_unique<TlsPump>(tls.client(), tls.client_fd(), tun, gp_framing(o.max_inner_size), o);
}

std::optional<std::string> failure(const TlsPump& p) {
    if (auto end = p.ended()) return end->second;
    return std::nullopt;
}

}  // namespace

TEST_CASE("HTTPS pipeline: tun packets leave as GP frames, frames from the gateway reach the tun") {
    in_private_netns([](io::TunDevice& tun) {
        TlsPair tls;
        std::unique_ptr<TlsPump> dp = https_pump(tls, tun, options());
        REQUIRE(dp->start());

        // tun -> frame: a datagram routed into the tun arrives framed, as IPv4.
        int tx = udp_socket_bound("10.9.0.1", 0);
        sockaddr_in peer{};
        peer.sin_family = AF_INET;
        peer.sin_port = htons(9999);
        ::inet_pton(AF_INET, "10.9.0.2", &peer.sin_addr);
        const std::string hello = "hello through the HTTPS tunnel";
        REQUIRE(::sendto(tx, hello.data(), hello.size(), 0, reinterpret_cast<sockaddr*>(&peer), sizeof peer) > 0);
        bool seen = false;
        for (int i = 0; i < 20 && !seen; ++i) {
            auto f = tls.next_frame();
            REQUIRE(f);
            if (f->first != gp::GpFrameType::Ipv4) continue;  // e.g. IPv6 chatter of a new link
            const Bytes& p = f->second;
            seen = p.size() == 28 + hello.size() && p[9] == 17 &&
                   std::memcmp(p.data() + 28, hello.data(), hello.size()) == 0;
        }
        CHECK(seen);

        // frame -> tun: 300 datagrams in one burst, one frame cut across two records.
        int rx = udp_socket_bound("10.9.0.1", 7777);
        Bytes burst;
        for (int i = 0; i < 300; ++i) {
            Bytes f = frame(udp_to_tun_address(7777, "datagram " + std::to_string(i)));
            burst.insert(burst.end(), f.begin(), f.end());
        }
        tls.send({burst.data(), 7});  // a record ending inside the first header
        tls.send({burst.data() + 7, burst.size() - 7});
        int got = 0;
        char buf[2048];
        while (got < 300) {
            ssize_t n = ::recv(rx, buf, sizeof buf, 0);
            if (n <= 0) break;
            CHECK(std::string(buf, static_cast<std::size_t>(n)) == "datagram " + std::to_string(got));
            ++got;
        }
        CHECK(got == 300);

        // Keepalives both ways; any frame is life.
        const auto before = dp->last_rx();
        dp->request_keepalive();
        auto ka = tls.next_frame();
        while (ka && ka->first != gp::GpFrameType::Keepalive) ka = tls.next_frame();
        REQUIRE(ka);
        CHECK(ka->second.empty());
        // One record per frame, as openconnect expects from a gateway (and sends itself).
        CHECK(tls.frames() == tls.records());
        tls.send(gp::kKeepaliveFrame);
        eventually([&] { return dp->stats().rx_keepalives != 0; });
        TlsTunnelStats s = dp->stats();
        CHECK(s.rx_keepalives == 1);
        CHECK(s.tx_keepalives == 1);
        CHECK(s.rx_packets == 300);
        CHECK(s.rx_frames == 300);
        CHECK(s.tx_packets >= 1);
        CHECK(dp->last_rx() >= before);
        CHECK(!failure(*dp));

        // A frame with a bad magic ends the stream for good (it cannot resynchronise).
        Bytes bad = frame(udp_to_tun_address(7777, "x"));
        bad[0] = 0x00;
        tls.send(bad);
        eventually([&] { return failure(*dp).has_value(); });
        REQUIRE(failure(*dp));
        CHECK(failure(*dp)->find("magic") != std::string::npos);
        dp->stop();
        ::close(tx);
        ::close(rx);
    });
}

TEST_CASE("HTTPS pipeline: the gateway closing the connection is reported, and stop() returns") {
    in_private_netns([](io::TunDevice& tun) {
        TlsPair tls;
        std::unique_ptr<TlsPump> dp = https_pump(tls, tun, options());
        REQUIRE(dp->start());
        tls.close_server();
        eventually([&] { return failure(*dp).has_value(); });
        REQUIRE(failure(*dp));
        CHECK_MESSAGE(failure(*dp)->find("closed") != std::string::npos, *failure(*dp));
        dp->stop();
    });
}

TEST_CASE("HTTPS pipeline refuses bad options") {
    in_private_netns([](io::TunDevice& tun) {
        TlsPair tls;
        TlsFramedOptions o = options();
        o.max_inner_size = 100;
        std::unique_ptr<TlsPump> dp = https_pump(tls, tun, o);
        Status started = dp->start();
        REQUIRE(!started);
        CHECK(started.error().message.find("576") != std::string::npos);
        CHECK(failure(*dp));
    });
}

// The same for every pipeline (ESP, DTLS, CSTP, here GP's HTTPS tunnel): a
// packet above the tunnel MTU is answered with ICMP "too big" (the sender's
// kernel learns the path MTU), and the tun counters count from the pipeline's start.
TEST_CASE("HTTPS pipeline: oversized packets get ICMP too-big; tun counters start at the pipeline's start") {
    in_private_netns([](io::TunDevice& tun) {
        TlsPair tls;
        TlsFramedOptions o = options();
        o.max_inner_size = 1200;  // the tun's MTU is 1400
        const int s = udp_df_socket();
        const std::string small = "small enough";
        const auto carried = [&] {
            REQUIRE(::send(s, small.data(), small.size(), 0) == static_cast<ssize_t>(small.size()));
            for (int i = 0; i < 20; ++i) {
                auto f = tls.next_frame();
                REQUIRE(f);
                if (f->first == gp::GpFrameType::Ipv4 && f->second.size() == 28 + small.size()) return true;
            }
            return false;
        };
        {
            // An earlier pipeline on the same tun (as ESP before a fallback) reads first.
            std::unique_ptr<TlsPump> first = https_pump(tls, tun, o);
            REQUIRE(first->start());
            CHECK(carried());
            first->stop();
        }
        const std::uint64_t reads_before = tun.counters().reads;
        REQUIRE(reads_before > 0);
        std::unique_ptr<TlsPump> dp = https_pump(tls, tun, o);
        REQUIRE(dp->start());
        const std::string big(1300 - 28, 'b');  // a 1300-byte IP packet: fits the tun, not the tunnel
        REQUIRE(::send(s, big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
        CHECK(eventually([&] { return path_mtu(s) == 1200; }));
        CHECK(socket_error(s) == EMSGSIZE);  // the ICMP's report to the sender
        CHECK(eventually([&] { return dp->stats().tx_icmp_too_big_sent == 1; }));
        CHECK(carried());  // the tunnel still carries what fits
        dp->stop();
        const TlsTunnelStats st = dp->stats();
        CHECK(st.drop_tx_too_big == 1);
        CHECK(st.tx_icmp_too_big_sent == 1);
        CHECK(st.tx_packets >= 1);
        CHECK(st.tx_tun_reads == tun.counters().reads - reads_before);
        CHECK(!failure(*dp));
        ::close(s);
    });
}
