#include "protocols/anyconnect/tunnel_mtu.h"

#include "protocols/anyconnect/dtls_framing.h"

namespace espvpn::anyconnect {

int requested_tunnel_mtu(int base_mtu, bool outer_ipv6) { return base_mtu - 82 - 8 - (outer_ipv6 ? 40 : 20); }

std::size_t dtls_link_mtu(std::size_t base_mtu, bool ipv6_outer) {
    const std::size_t headers = (ipv6_outer ? 40 : 20) + 8;
    return base_mtu > headers ? base_mtu - headers : 0;
}

std::size_t dtls_tunnel_mtu(std::size_t record_payload_mtu) {
    return record_payload_mtu > kDtlsPacketHeaderSize ? record_payload_mtu - kDtlsPacketHeaderSize : 0;
}

}  // namespace espvpn::anyconnect
