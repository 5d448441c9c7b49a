#include <doctest/doctest.h>

// AnyConnect's MTUs (protocols/anyconnect/tunnel_mtu.h), with openconnect's numbers.
#include "protocols/anyconnect/tunnel_mtu.h"

using namespace espvpn::anyconnect;

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
