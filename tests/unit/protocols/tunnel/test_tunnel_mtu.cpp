#include <doctest/doctest.h>

// How each protocol derives the tun MTU (protocols/tunnel/tunnel_mtu.h), with openconnect's numbers.
#include "protocols/tunnel/tunnel_mtu.h"

using namespace espvpn::gp;
using namespace espvpn::anyconnect;

TEST_CASE("esp_tunnel_mtu: openconnect's figures, an IPv6 outer header costs 20 more before block rounding") {
    // docs/protocols/globalprotect.md §10.9's example: IPv4, AES-CBC (IV 16) + HMAC-SHA1-96 (ICV 12), default base 1406.
    CHECK(esp_tunnel_mtu(0, false, 16, 12) == 1326);
    CHECK(esp_tunnel_mtu(0, true, 16, 12) == 1310);
    // AES-GCM (IV 8, ICV 16): 1406 - 48 - 32 = 1326, whole blocks 1312, - 2.
    CHECK(esp_tunnel_mtu(0, false, 8, 16) == 1342);
    CHECK(esp_tunnel_mtu(0, true, 8, 16) == 1310);
    CHECK(esp_tunnel_mtu(1500, true, 8, 16) == 1406);
    CHECK(esp_tunnel_mtu(1000, true, 8, 16) == esp_tunnel_mtu(1280, true, 8, 16));  // never below 1280
}

TEST_CASE("https_tunnel_mtu: outer IP, TCP, TLS record and GP frame header off the base") {
    CHECK(https_tunnel_mtu(0, false) == 1406 - 20 - 32 - 21 - 16);
    CHECK(https_tunnel_mtu(0, true) == https_tunnel_mtu(0, false) - 20);
}

TEST_CASE("gp_tun_mtu: --mtu, then the gateway's, then computed over the gateway's address family") {
    GpMtuInputs v4{0, 0, 0, "10.201.0.1", 8, 16, true};
    GpMtuInputs v6 = v4;
    v6.gateway_address = "fd00:201::1";
    CHECK(gp_tun_mtu(v4) == 1342);
    CHECK(gp_tun_mtu(v6) == 1310);
    // HTTPS only (--no-dtls, or no ESP keys): still the gateway's family, not IPv4.
    v4.esp = v6.esp = false;
    CHECK(gp_tun_mtu(v4) == https_tunnel_mtu(0, false));
    CHECK(gp_tun_mtu(v6) == https_tunnel_mtu(0, true));
    v6.gateway_mtu = 1400;
    CHECK(gp_tun_mtu(v6) == 1400);
    v6.option_mtu = 1280;
    CHECK(gp_tun_mtu(v6) == 1280);
}

TEST_CASE("AnyConnect: the X-CSTP-MTU openconnect asks for, DTLS's link and tunnel MTUs") {
    // docs/protocols/anyconnect.md §7.1, openconnect observed: base 65535 -> X-CSTP-MTU 65425; --base-mtu 1300 -> 1190 (over IPv4).
    CHECK(requested_tunnel_mtu(65535, false) == 65425);
    CHECK(requested_tunnel_mtu(1300, false) == 1190);
    CHECK(requested_tunnel_mtu(1406, false) == 1296);  // the default base
    CHECK(requested_tunnel_mtu(1406, true) == 1276);   // IPv6 outer header: 20 more
    // OC's PSK-mode rule: the base less the outer IP and UDP headers.
    CHECK(dtls_link_mtu(1500, false) == 1472);
    CHECK(dtls_link_mtu(1500, true) == 1452);
    CHECK(dtls_link_mtu(28, false) == 0);
    CHECK(dtls_link_mtu(0, true) == 0);
    CHECK(dtls_tunnel_mtu(1435) == 1434);  // ocserv's data MTU for link 1500 with AES-256-GCM
    CHECK(dtls_tunnel_mtu(1) == 0);
}
