#include <doctest/doctest.h>

#include "protocols/esp/gp_probe.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

// Independent RFC 1071 checksum: add 16-bit words with end-around carry, byte by byte.
std::uint16_t ones_complement_sum(const Bytes& data) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < data.size(); ++i) sum += (i % 2 == 0) ? data[i] * 256u : data[i];
    while (sum > 0xffff) sum = (sum >> 16) + (sum & 0xffff);
    return static_cast<std::uint16_t>(sum);
}

bool checksum_ok(const Bytes& data) { return ones_complement_sum(data) == 0xffff; }

Bytes slice(const std::array<std::uint8_t, kGpProbeMaxSize>& a, std::size_t from, std::size_t to) {
    return Bytes(a.begin() + static_cast<long>(from), a.begin() + static_cast<long>(to));
}

}  // namespace

TEST_CASE("GP probe, IPv4: OpenConnect's bytes, valid IP and ICMP checksums") {
    const Bytes src = hex("0a000002"), dst = hex("c0a80101");
    std::array<std::uint8_t, kGpProbeMaxSize> pkt{};
    GpProbe p = build_gp_probe(pkt, src, dst, 3);
    REQUIRE(p.size == 44);
    CHECK(p.next_header == 4);
    CHECK(slice(pkt, 0, 10) == hex("4500002c474740004001"));
    CHECK(slice(pkt, 12, 20) == concat({src, dst}));
    CHECK(slice(pkt, 20, 22) == hex("0800"));
    CHECK(slice(pkt, 24, 28) == hex("47470003"));
    CHECK(slice(pkt, 28, 44) == Bytes(kGpProbeMagic.begin(), kGpProbeMagic.end()));
    CHECK(checksum_ok(slice(pkt, 0, 20)));
    CHECK(checksum_ok(slice(pkt, 20, 44)));
    CHECK(slice(pkt, 10, 12) != hex("0000"));
}

TEST_CASE("GP probe, IPv6: valid ICMPv6 checksum over the pseudo-header") {
    const Bytes src = hex("fd000201000000000000000000000002"), dst = hex("fd000201000000000000000000000001");
    std::array<std::uint8_t, kGpProbeMaxSize> pkt{};
    GpProbe p = build_gp_probe(pkt, src, dst, 0x1234, 0xabcd);
    REQUIRE(p.size == 64);
    CHECK(p.next_header == 41);
    CHECK(slice(pkt, 0, 8) == hex("60000000 00183a80"));
    CHECK(slice(pkt, 8, 40) == concat({src, dst}));
    CHECK(slice(pkt, 40, 42) == hex("8000"));
    CHECK(slice(pkt, 44, 48) == hex("abcd1234"));
    Bytes pseudo = concat({src, dst, hex("00000018 0000003a"), slice(pkt, 40, 64)});
    CHECK(checksum_ok(pseudo));
    // Correct checksum must depend on the addresses (the pseudo-header is really used).
    Bytes wrong = concat({dst, dst, hex("00000018 0000003a"), slice(pkt, 40, 64)});
    CHECK(!checksum_ok(wrong));
}

TEST_CASE("GP probe: bad arguments give size 0") {
    std::array<std::uint8_t, kGpProbeMaxSize> pkt{};
    CHECK(build_gp_probe(pkt, hex("0a000001"), hex("fd000201000000000000000000000001"), 1).size == 0);
    CHECK(build_gp_probe(pkt, hex("0a0000"), hex("0a0000"), 1).size == 0);
    std::array<std::uint8_t, 43> small{};
    CHECK(build_gp_probe(small, hex("0a000001"), hex("0a000002"), 1).size == 0);
}

TEST_CASE("GP probe reply recognition") {
    const Bytes client = hex("0a000002"), gw = hex("c0a80101");
    std::array<std::uint8_t, kGpProbeMaxSize> pkt{};
    build_gp_probe(pkt, gw, client, 1);  // shaped like the reply, then made one
    Bytes reply = slice(pkt, 0, 44);
    reply[20] = 0;  // echo reply
    CHECK(is_gp_probe_reply(reply, gw));
    CHECK(!is_gp_probe_reply(reply, client));            // not from the gateway address
    Bytes request = slice(pkt, 0, 44);
    CHECK(!is_gp_probe_reply(request, gw));               // a request is not a reply
    Bytes no_magic = reply;
    no_magic[30] ^= 1;
    CHECK(!is_gp_probe_reply(no_magic, gw));
    CHECK(!is_gp_probe_reply(Bytes(reply.begin(), reply.begin() + 40), gw));  // truncated
    Bytes udp = reply;
    udp[9] = 17;
    CHECK(!is_gp_probe_reply(udp, gw));

    const Bytes gw6 = hex("fd000201000000000000000000000001"), c6 = hex("fd000201000000000000000000000002");
    build_gp_probe(pkt, gw6, c6, 1);
    Bytes reply6 = slice(pkt, 0, 64);
    reply6[40] = 129;
    CHECK(is_gp_probe_reply(reply6, gw6));
    CHECK(!is_gp_probe_reply(reply6, c6));
    CHECK(!is_gp_probe_reply(reply6, gw));  // family mismatch
    CHECK(!is_gp_probe_reply(slice(pkt, 0, 64), gw6));
}
