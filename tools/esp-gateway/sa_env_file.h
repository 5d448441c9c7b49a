// The fake GP gateway's SA file in its NAME=VALUE form (fake-gp-gateway
// --sa-file-format env): one ESP SA pair per getconfig, with a generation
// number. The test client's getconfig helper writes the same form from the
// getconfig XML, so both ends of a test tunnel read their keys alike.
#pragma once

#include <cstdint>
#include <string>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/esp/esp_sa.h"

namespace espvpn::tools {

struct SaFileDirection {
    std::uint32_t spi = 0;
    Secret ekey_hex;  // hex text, as getconfig carries it
    Secret akey_hex;  // empty for GCM
};

struct SaFile {
    std::uint64_t generation = 0;
    std::string enc;   // GP enc-algo, e.g. aes-128-cbc
    std::string auth;  // GP hmac-algo, e.g. sha1; empty for GCM
    unsigned udp_port = 4501;
    std::string gw_address;
    std::string client_ip;
    std::string client_ip6;
    SaFileDirection c2s;
    SaFileDirection s2c;

    // Every line NAME=VALUE; unknown names are ignored, missing or bad ones named in the error.
    static Result<SaFile> load(const std::string& path);
    static Result<SaFile> parse(std::string_view text);

    Result<EspOutboundSa> outbound(const SaFileDirection& d) const;
    Result<EspInboundSa> inbound(const SaFileDirection& d) const;
};

}  // namespace espvpn::tools
