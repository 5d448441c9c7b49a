#include "protocols/gp/tunnel_mtu.h"

#include "crypto/esp_transform.h"
#include "protocols/gp/https_tunnel.h"

namespace espvpn::gp {

namespace {
int base_or_default(int base_mtu) {
    int m = base_mtu > 0 ? base_mtu : 1406;
    return m < 1280 ? 1280 : m;
}
}  // namespace

int esp_tunnel_mtu(int base_mtu, bool outer_ipv6, std::size_t iv_size, std::size_t icv_size) {
    int m = base_or_default(base_mtu);
    m -= 8 + (outer_ipv6 ? 40 : 20);                             // UDP + outer IP
    m -= static_cast<int>(kEspSpiSeqSize + icv_size + iv_size);  // ESP header, IV, ICV
    m &= ~15;                                                    // whole cipher blocks
    return m - 2;                                                // pad length + next header
}

int https_tunnel_mtu(int base_mtu, bool outer_ipv6) {
    // Outer IP + TCP with timestamps, a TLS record (header + AEAD tag), the GP frame header.
    return base_or_default(base_mtu) - (outer_ipv6 ? 40 : 20) - 32 - (5 + 16) - static_cast<int>(kFrameHeaderSize);
}

int gp_tun_mtu(const GpMtuInputs& in) {
    if (in.option_mtu > 0) return in.option_mtu;
    if (in.gateway_mtu > 0) return in.gateway_mtu;
    const bool outer_v6 = in.gateway_address.find(':') != std::string::npos;
    return in.esp ? esp_tunnel_mtu(in.base_mtu, outer_v6, in.esp_iv_size, in.esp_icv_size)
                  : https_tunnel_mtu(in.base_mtu, outer_v6);
}

}  // namespace espvpn::gp
