// How an AnyConnect tunnel derives its MTUs from the link MTU and what DTLS adds to a
// packet: openconnect's figures, docs/protocols/anyconnect.md §7.1 and §7.3. "Base MTU"
// is the link MTU outside the tunnel (--base-mtu, X-CSTP-Base-MTU). GP's counterpart:
// protocols/gp/tunnel_mtu.h.
#pragma once

#include <cstddef>

namespace espvpn::anyconnect {

// The X-CSTP-MTU openconnect asks for: the base less the worst DTLS overhead
// (1 type + 13 header + 20 MAC + 32 IV + 16 padding), UDP and the outer IP.
int requested_tunnel_mtu(int base_mtu, bool outer_ipv6);
// The link MTU to give the DTLS library: the server's X-CSTP-Base-MTU minus the
// outer IP and UDP headers (OC's PSK-mode rule). 0 when base_mtu is too small to
// carry anything.
std::size_t dtls_link_mtu(std::size_t base_mtu, bool ipv6_outer);
// The tunnel MTU left for IP packets once the DTLS library says how much
// plaintext a record may carry: one byte less, for the type header.
std::size_t dtls_tunnel_mtu(std::size_t record_payload_mtu);

}  // namespace espvpn::anyconnect
