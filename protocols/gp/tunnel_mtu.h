// How a GP tunnel derives the tun MTU from the link MTU and what its carrier (ESP over
// UDP, or the HTTPS tunnel) adds to a packet: openconnect's figures,
// docs/protocols/globalprotect.md §10.9. "Base MTU" is the link MTU outside the tunnel
// (--base-mtu; openconnect's default 1406, never below 1280). AnyConnect's counterpart:
// protocols/anyconnect/tunnel_mtu.h.
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
