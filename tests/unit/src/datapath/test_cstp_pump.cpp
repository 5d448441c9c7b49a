// TlsPump with CSTP framing end to end on one machine: a tun in a private network namespace, the
// pump on one end of a TLS session over a socketpair, the test playing the
// AnyConnect server on the other. Needs root (tun + unshare); skipped otherwise.
#include "tests/unit/src/datapath/tun_tls_harness.h"

#include "protocols/anyconnect/cstp.h"
#include "src/datapath/tls/tls_pump.h"

using namespace espvpn;
using namespace espvpn::datapath;
using namespace espvpn::test;
using anyconnect::CstpType;

namespace {

Bytes cstp(CstpType type, std::span<const std::uint8_t> payload = {}) {
    Bytes b(anyconnect::kCstpHeaderSize + payload.size());
    anyconnect::write_cstp_header(type, static_cast<std::uint16_t>(payload.size()), b.data());
    std::copy(payload.begin(), payload.end(), b.begin() + anyconnect::kCstpHeaderSize);
    return b;
}

// The next CSTP packet of `type` from the pump (one record each); nullopt after 5 s without.
std::optional<Bytes> next_of(TlsPair& tls, CstpType type) {
    for (int i = 0; i < 50; ++i) {
        auto r = next_record(tls.server());
        if (!r) return std::nullopt;
        REQUIRE(r->size() >= anyconnect::kCstpHeaderSize);
        if ((*r)[6] == static_cast<std::uint8_t>(type)) return Bytes(r->begin() + anyconnect::kCstpHeaderSize, r->end());
    }
    return std::nullopt;
}

struct Carrier final : PacketCarrier {
    bool carrying() const override { return on; }
    Status send(io::PacketBatch& batch) override {
        packets += batch.size();
        return {};
    }
    std::atomic<bool> on{true};
    std::atomic<std::size_t> packets{0};
};

}  // namespace

TEST_CASE("CSTP pump: tun <-> CSTP records, DPD answered, carrier hand-off, DISCONNECT ends it") {
    in_private_netns([](io::TunDevice& tun) {
        TlsPair tls;
        REQUIRE(::fcntl(tls.client_fd(), F_SETFL, ::fcntl(tls.client_fd(), F_GETFL) | O_NONBLOCK) == 0);
        TlsPump pump(tls.client(), tls.client_fd(), tun, cstp_framing(), cstp_pump_options(1400));
        // Bytes that came with the CONNECT reply: a keepalive.
        const Bytes early = cstp(CstpType::keepalive);
        REQUIRE(pump.start(early));

        // tun -> CSTP: a datagram into the tun leaves as one data record.
        const int s = udp_df_socket();
        const std::string hello = "hello over CSTP";
        REQUIRE(::send(s, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size()));
        bool seen = false;
        for (int i = 0; i < 20 && !seen; ++i) {
            auto p = next_of(tls, CstpType::data);
            REQUIRE(p);
            seen = p->size() == 28 + hello.size() && std::memcmp(p->data() + 28, hello.data(), hello.size()) == 0;
        }
        CHECK(seen);

        // CSTP -> tun, and the server's DPD request answered with its payload.
        const int rx = udp_socket_bound("10.9.0.1", 7777);
        const Bytes d = udp_to_tun_address(7777, "from the server");
        tls.send(cstp(CstpType::data, d));
        char buf[2048];
        CHECK(::recv(rx, buf, sizeof buf, 0) == static_cast<ssize_t>(std::string("from the server").size()));
        const std::uint8_t probe[] = {1, 2, 3};
        tls.send(cstp(CstpType::dpd_request, probe));
        auto answer = next_of(tls, CstpType::dpd_response);
        REQUIRE(answer);
        CHECK(*answer == Bytes(probe, probe + 3));
        pump.request_dpd();
        CHECK(next_of(tls, CstpType::dpd_request));
        tls.send(cstp(CstpType::dpd_response));

        // While a carrier carries, tun packets go to it, not to CSTP.
        Carrier carrier;
        pump.set_channel(&carrier);
        REQUIRE(::send(s, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size()));
        CHECK(eventually([&] { return carrier.packets >= 1; }));
        pump.set_channel(nullptr);

        const std::uint8_t reason[] = {anyconnect::kDisconnectLogout, 'b', 'y', 'e'};
        tls.send(cstp(CstpType::disconnect, reason));
        REQUIRE(eventually([&] { return pump.ended().has_value(); }));
        CHECK(pump.ended()->first == TlsPumpEnd::server_disconnect);
        CHECK(pump.ended()->second.find("bye") != std::string::npos);
        pump.stop();
        const TlsTunnelStats st = pump.stats();
        CHECK(st.rx_keepalives == 1);
        CHECK(st.rx_packets == 1);
        CHECK(st.rx_dpd_requests == 1);
        CHECK(st.rx_dpd_responses == 1);
        CHECK(st.tx_dpd_responses == 1);
        CHECK(st.tx_dpd_requests == 1);
        CHECK(st.tx_packets >= 1);
        CHECK(st.tx_tls_records == st.tx_packets + 2);  // one record per packet; two control records
        ::close(s);
        ::close(rx);
    });
}

// As for every pipeline: oversized packets get ICMP too-big, tun counters start at the pipeline's start.
TEST_CASE("CSTP pump: oversized packets get ICMP too-big; tun counters start at the pump's start") {
    in_private_netns([](io::TunDevice& tun) {
        TlsPair tls;
        REQUIRE(::fcntl(tls.client_fd(), F_SETFL, ::fcntl(tls.client_fd(), F_GETFL) | O_NONBLOCK) == 0);
        const int s = udp_df_socket();
        const std::string small = "small enough";
        const auto carried = [&] {
            REQUIRE(::send(s, small.data(), small.size(), 0) == static_cast<ssize_t>(small.size()));
            for (int i = 0; i < 20; ++i) {
                auto p = next_of(tls, CstpType::data);
                REQUIRE(p);
                if (p->size() == 28 + small.size()) return true;
            }
            return false;
        };
        {
            // An earlier connection's pump on the same tun reads first.
            TlsPump first(tls.client(), tls.client_fd(), tun, cstp_framing(), cstp_pump_options(1200));
            REQUIRE(first.start());
            CHECK(carried());
        }
        const std::uint64_t reads_before = tun.counters().reads;
        REQUIRE(reads_before > 0);
        TlsPump pump(tls.client(), tls.client_fd(), tun, cstp_framing(), cstp_pump_options(1200));  // the tun's MTU is 1400
        REQUIRE(pump.start());
        const std::string big(1300 - 28, 'b');
        REQUIRE(::send(s, big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
        CHECK(eventually([&] { return path_mtu(s) == 1200; }));
        CHECK(socket_error(s) == EMSGSIZE);  // the ICMP's report to the sender
        CHECK(eventually([&] { return pump.stats().tx_icmp_too_big_sent == 1; }));
        CHECK(carried());
        pump.stop();
        const TlsTunnelStats st = pump.stats();
        CHECK(st.drop_tx_too_big == 1);
        CHECK(st.tx_icmp_too_big_sent == 1);
        CHECK(st.tx_tun_reads == tun.counters().reads - reads_before);
        CHECK(!pump.ended());
        ::close(s);
    });
}
