// The gateway's getconfig reply (root <response>): everything needed to bring
// the tunnel up — addresses, routes, DNS, lifetimes and the ESP SAs. Parsing
// validates every value it keeps, so a GpTunnelConfig is always usable; a bad
// value is rejected with a message naming the element. Unknown elements are
// ignored (servers keep adding some).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crypto/secret.h"
#include "protocols/gp/auth_reply.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::gp {

struct GpEspDirection {
    std::uint32_t spi = 0;
    Secret enc_key;   // AES key (GCM: key followed by the 4-byte salt)
    Secret auth_key;  // empty for GCM
};

struct GpIpsecConfig {
    std::uint16_t udp_port = 4501;
    std::string mode = "esp-tunnel";
    std::string enc_algo;   // canonical: aes-128-cbc, aes-256-cbc, aes-128-gcm, aes-256-gcm
    std::string hmac_algo;  // sha1, md5, sha256; "" for GCM
    GpEspDirection c2s;     // our outbound SA
    GpEspDirection s2c;     // inbound SA
};

struct GpTunnelConfig {
    // The protocol-independent part, filled by the parser: addresses (canonical text), netmask,
    // MTU (0 = not given; compute it, docs/protocols/globalprotect.md §10.9), DNS (v4 and v6, deduplicated, at most 3), WINS
    // as nbns, <dns-suffix> joined by spaces into default_domain, <include-/exclude-split-tunneling-domain>
    // members (deduplicated, at most 1024 each) into split_include/exclude_domains, routes (split_include empty
    // when a default route is among them or none is given), disconnect-on-idle, and
    // CISCO_CSTP_OPTIONS as openconnect fills it for GP. gateway_address and
    // direct_udp_address are the caller's: where it reached the gateway.
    TunnelConfig tunnel;
    bool default_route = false;  // an include route is 0.0.0.0/0 or ::/0, or none given
    std::string gw_address;      // ESP probe destination ("" if absent or 0.0.0.0)
    std::string gw_address_v6;
    std::string connected_gw_ip;
    std::string ssl_tunnel_url = "/ssl-tunnel-connect.sslvpn";
    unsigned timeout = 0;             // ESP key / tunnel lifetime, s (0 = not given)
    unsigned lifetime = 0;            // authcookie lifetime, s
    unsigned hip_report_interval = 0;  // s; some gateways send it here, most only in the portal
    std::string quarantine;           // "no" normally
    std::optional<GpIpsecConfig> ipsec;  // absent: ESP impossible, use HTTPS
};

Result<GpTunnelConfig> parse_tunnel_config(const xml::Document& doc);
Result<GpAuthOutcome<GpTunnelConfig>> parse_tunnel_config_reply(std::string_view body);

// Key sizes in bytes the getconfig <ipsec> block must carry for an algorithm;
// nullopt for an algorithm espvpn does not know.
std::optional<std::size_t> enc_key_bytes(std::string_view enc_algo);
std::optional<std::size_t> auth_key_bytes(std::string_view hmac_algo);

}  // namespace espvpn::gp
