// Which Proxy-Authorization an HTTP CONNECT carries, round by round (sans-IO), in
// openconnect's order: the first request goes without credentials (Basic at once when
// --proxy-auth allows only Basic of what espvpn answers); a 407 that offers NTLM is
// answered with NTLM (negotiate, then authenticate on the same connection), else one
// offering Basic with Basic when allowed. Each method is tried once: a proxy that keeps
// refusing ends in an error after at most four requests, never a loop.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "crypto/secret.h"
#include "protocols/proxy/proxy.h"

namespace espvpn::proxy {

class ConnectAuth {
public:
    ConnectAuth(const ProxySpec& spec, ProxyAuthMethods methods, std::string host, std::uint16_t port);

    // The first CONNECT request.
    Secret first_request();

    struct Step {
        enum class Kind { send, reconnect_then_send, fail } kind = Kind::fail;
        Secret request;     // send / reconnect_then_send
        std::string error;  // fail: says what the proxy answered and what to change
    };
    // The proxy refused (a non-2xx reply, whole); `reusable`: the connection may carry the
    // next request. NTLM's authenticate message needs `filetime` (now) and 8 random bytes.
    Step on_refusal(const ConnectReply& reply, bool reusable, std::uint64_t filetime,
                    std::span<const std::uint8_t, 8> client_challenge);

    // For the log: the method of the last request ("NTLM", "Basic" or "none").
    const char* method() const;

private:
    enum class State { none, basic_sent, ntlm_negotiate_sent, ntlm_authenticate_sent };
    Step send(Secret authorization, bool reusable);
    Step fail(const ConnectReply& reply, std::string why) const;

    ProxySpec spec_;
    ProxyAuthMethods methods_;
    std::string host_;
    std::uint16_t port_;
    State state_ = State::none;
    bool basic_tried_ = false;
    bool ntlm_tried_ = false;
};

}  // namespace espvpn::proxy
