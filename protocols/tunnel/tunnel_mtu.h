// How each protocol derives the tun MTU from the link MTU and what its carrier
// adds to a packet (openconnect's figures: docs/protocols/globalprotect.md §10.9,
// docs/protocols/anyconnect.md §7.1 and §7.3). "Base MTU" is the link MTU outside
// the tunnel (--base-mtu, X-CSTP-Base-MTU; openconnect's default 1406, never below
// 1280 for GP).
#pragma once

#include <cstddef>
#include <string>

namespace espvpn::gp {

// ESP over UDP: outer IP + UDP, SPI + sequence, IV and ICV off the base, rounded
// down to whole 16-byte cipher blocks, then the pad-length and next-header bytes.
int esp_tunnel_mtu(int base_mtu, bool outer_ipv6, std::size_t iv_size, std::size_t icv_size);
// The HTTPS tunnel: outer IP + TCP (with timestamps), a TLS record's header and
// AEAD tag, and the 16-byte GP frame header off the base.
int https_tunnel_mtu(int base_mtu, bool outer_ipv6);

// What decides the tun MTU of a GP tunnel (all optional but the gateway's address).
struct GpMtuInputs {
    int option_mtu = 0;           // --mtu
    int gateway_mtu = 0;          // getconfig's <mtu> (0: not given)
    int base_mtu = 0;             // --base-mtu (0: openconnect's default, 1406)
    std::string gateway_address;  // numeric address we reached the gateway at: its family is the outer one
    std::size_t esp_iv_size = 0;  // with ESP keys: the suite's IV and ICV sizes
    std::size_t esp_icv_size = 0;
    bool esp = false;             // false: the HTTPS tunnel only (--no-dtls or no keys)
};
// --mtu, else the gateway's, else computed for the transport over the outer family.
int gp_tun_mtu(const GpMtuInputs& in);

}  // namespace espvpn::gp

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
