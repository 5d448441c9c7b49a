// The AnyConnect tunnel request (docs/protocols/anyconnect.md §2): "CONNECT /CSCOSSLC/tunnel"
// with the X-CSTP-*/X-DTLS-* headers, and the server's "200 CONNECTED" reply
// headers parsed into the tunnel's configuration and the DTLS parameters.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/http/message.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::anyconnect {

inline constexpr std::string_view kTunnelPath = "/CSCOSSLC/tunnel";
inline constexpr std::string_view kPskNegotiate = "PSK-NEGOTIATE";

// What the client offers for the UDP channel. OC's list minus the suites
// ocserv refuses: PSK first (the modern mode), then the legacy resumption names.
struct AcDtlsOffer {
    Secret master_secret;  // 48 random bytes: the legacy mode's pre-agreed master secret
    std::string cipher_suites = "PSK-NEGOTIATE:OC-DTLS1_2-AES256-GCM:OC-DTLS1_2-AES128-GCM:AES256-SHA:AES128-SHA";
    std::string dtls12_cipher_suites = "AES256-GCM-SHA384:AES128-GCM-SHA256";
};

struct AcConnectSettings {
    std::string host;  // as in the URL (Host header)
    std::uint16_t port = 443;
    std::string user_agent;
    std::string hostname;    // X-CSTP-Hostname
    int base_mtu = 1406;     // X-CSTP-Base-MTU
    int mtu = 1406 - 110;    // X-CSTP-MTU (docs/protocols/anyconnect.md §7.1: base - DTLS overhead - UDP - IP)
    bool ipv6 = true;        // false: --disable-ipv6
    std::optional<AcDtlsOffer> dtls;  // nullopt: --no-dtls, no X-DTLS-* headers
    std::string previous_ipv4;        // on reconnect: ask for the same addresses
    std::string previous_ipv6;
};

// The CONNECT request; the Cookie carries only `webvpn`. Error for a header
// value with a line break.
Result<Secret> build_connect_request(const AcConnectSettings& settings, const Secret& webvpn);

// X-CSTP-Rekey-Method / X-DTLS-Rekey-Method (docs/protocols/anyconnect.md §6).
enum class AcRekeyMethod { none, ssl, new_tunnel };
// "ssl", "new-tunnel", "none" or "" (absent); anything else is an error naming it
// (the reply parser then keeps `none`, as openconnect does with a method it does not know).
Result<AcRekeyMethod> parse_rekey_method(std::string_view text);
const char* rekey_method_name(AcRekeyMethod method);

struct AcDtlsParams {
    enum class Mode { psk, legacy };
    Mode mode = Mode::psk;
    // PSK: the App-ID for the ClientHello session_id; legacy: the session to "resume".
    std::array<std::uint8_t, 32> session_id{};
    std::string cipher_suite;   // "PSK-NEGOTIATE", or the legacy name chosen
    bool dtls12_header = false; // the suite came in X-DTLS12-CipherSuite
    std::uint16_t port = 0;
    int dpd_s = 0;
    int keepalive_s = 0;
    int rekey_s = 0;
    std::string rekey_method;   // "ssl", "new-tunnel", "" (not given)
    AcRekeyMethod rekey = AcRekeyMethod::none;  // rekey_method parsed (none when unknown)
    int mtu = 0;                // X-DTLS-MTU (legacy only); 0 when absent
};

// What "200 CONNECTED" told us. Values are checked at parse time.
struct AcCstpConfig {
    // The protocol-independent part: X-CSTP-Address/-Netmask/-Address-IP6 (canonical text),
    // the tunnel MTU max(X-CSTP-MTU, X-DTLS-MTU), DNS (both families, server order, at most 3
    // per family), NBNS, domains, split routes, banner, proxy PAC, idle timeout, and every
    // X-CSTP-* header in order as protocol_options. gateway_address is the caller's.
    TunnelConfig tunnel;
    int cstp_mtu = 0;            // X-CSTP-MTU alone (the MTU while data runs over CSTP)
    int base_mtu = 0;            // X-CSTP-Base-MTU, 0 when absent
    int dpd_s = 0;               // 0: none
    int keepalive_s = 0;
    int session_timeout_s = 0;   // smallest non-zero of the session timeouts, 0: none
    int rekey_s = 0;
    std::string rekey_method;    // "ssl", "new-tunnel", "none", ""
    AcRekeyMethod rekey = AcRekeyMethod::none;  // rekey_method parsed (none when unknown)
    std::string content_encoding;  // must be empty: compression is not negotiated
    std::optional<AcDtlsParams> dtls;  // absent: the server offers no usable DTLS
    std::string dtls_unusable;        // why DTLS parameters were dropped, if some came
};

// The reply's status: 401 → cookie rejected; anything but 200 is an error.
struct AcConnectRefusal {
    int status = 0;
    bool cookie_rejected() const { return status == 401; }
};

// Parses the CONNECT reply (status and headers; the tunnel bytes that follow are
// not part of it). Errors: a non-200 status (with X-Reason), no address, no MTU,
// a bad address/route/number (named), or a Content-Encoding we did not offer.
Result<AcCstpConfig> parse_connect_reply(const http::Response& response, AcConnectRefusal* refusal = nullptr);

}  // namespace espvpn::anyconnect
