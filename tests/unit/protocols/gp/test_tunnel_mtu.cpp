#include <doctest/doctest.h>

// How a GP tunnel derives the tun MTU (protocols/gp/tunnel_mtu.h), with openconnect's numbers.
#include "protocols/gp/tunnel_mtu.h"

using namespace espvpn::gp;

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
