// The GlobalProtect tunnel, once logged in: tun device, host configuration
// (built-in or vpnc-script), and the transport that carries the packets:
//
//   ESP over UDP (datapath/EspDatapath) while its probe is answered, with DPD and
//   rekey (a new getconfig whose SAs are installed beside the old ones);
//   the HTTPS tunnel (datapath/HttpsDatapath, GET ssl-tunnel-connect on the
//   gateway's TLS port) when the probe goes unanswered, ESP dies later, the user
//   says --no-dtls, or the gateway offers no ESP keys. While on HTTPS, ESP is
//   tried again now and then (fresh keys by getconfig, a few probes); when it
//   answers, the traffic moves back to ESP and the TLS tunnel is closed.
//   When both are lost (gateway gone, link down, the client's address changed),
//   reconnect attempts with backoff for up to --reconnect-timeout: a new
//   getconfig with the same cookie, new SAs on a new UDP socket, the probe,
//   else the HTTPS tunnel (ReconnectPolicy has the schedule).
//
// The tun, its addresses and routes stay the same across switches and
// reconnects; no new login (the session cookie is reused). Everything here runs on the control
// thread; the datapaths never wait for it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "crypto/result.h"
#include "protocols/gp/session_cookie.h"
#include "src/io/tls_stream.h"
#include "src/session/gp_tunnel_setup.h"

namespace espvpn::session {

struct GpTunnelOptions {
    std::string interface_name;   // -i: name or a pre-created persistent tun
    std::string script;           // --script: vpnc-script command line ("" = built-in setup)
    int mtu = 0;                  // --mtu; 0 = computed from base_mtu and the suite
    int base_mtu = 0;             // --base-mtu; 0 = 1406, openconnect's default
    std::string stats_json;       // --stats-json FILE
    int log_level = 1;            // for the script's LOG_LEVEL
    bool disable_ipv6 = false;
    bool esp = true;              // false: --no-dtls, the HTTPS tunnel only
    int udp_local_port = 0;       // --dtls-local-port: the ESP socket's local port (0 = any)
    // No probe reply by then: fall back to HTTPS (openconnect waits 5 s, the
    // Windows client 10 s; doc 10.5).
    std::chrono::seconds probe_timeout{5};
    std::chrono::seconds dpd_interval{10};    // quiet this long: probe / keepalive
    std::chrono::seconds dead_after{20};      // quiet this long: the transport is dead
    // On HTTPS: try ESP again this often (openconnect's 60 s attempt period); 0 = never.
    std::chrono::seconds esp_retry_interval{60};
    // Transport lost: keep trying to reconnect this long, then end (openconnect's 300 s).
    std::chrono::seconds reconnect_timeout{300};
    // Host-integration hooks (src/cli): called once on the control thread.
    // after_setup: tun, its configuration and the sockets are ready, nothing else
    // needs privileges (--setuid drops them here); an error ends the tunnel.
    std::function<Status()> after_setup;
    // on_connected: traffic flows for the first time (ESP answered, or the HTTPS
    // tunnel started); -b detaches here.
    std::function<void()> on_connected;
};

// Why the tunnel ended.
enum class TunnelEnd {
    user_logout,      // SIGINT / SIGTERM: log out
    user_keep_cookie, // SIGHUP: disconnect, keep the session valid
    esp_failed,       // neither ESP nor the HTTPS tunnel came back within --reconnect-timeout
    error,            // setup failed, or a rekey was refused
    cookie_rejected,  // the gateway refused our cookie (rekey or tunnel GET)
};

// A new getconfig (rekey, or fresh ESP keys after the HTTPS tunnel voided the
// old ones); must not block for long.
using RefetchConfig = std::function<Result<GpTunnelSetup>()>;
// A TLS connection to the gateway for the HTTPS tunnel (e.g. the login's
// kept-alive one, HttpsClient::release_connection).
using ConnectGateway = std::function<Result<std::unique_ptr<io::TlsStream>>()>;

struct GpGatewayLinks {
    RefetchConfig refetch;
    ConnectGateway connect;
    const gp::GpSessionCookie* cookie = nullptr;  // for the tunnel GET; must outlive the tunnel
    // After a failed refetch: was it the gateway refusing the cookie (rather than unreachable)?
    std::function<bool()> cookie_rejected;
    // Drops kept-alive TLS connections to the gateway: after a loss they may be stale
    // (from a source address that is gone: a request on one would hang until its timeout).
    std::function<void()> forget_connections;
};

// The tunnel MTU for ESP over UDP (openconnect's calculation, doc 10.9).
int esp_tunnel_mtu(int base_mtu, bool outer_ipv6, std::size_t iv_size, std::size_t icv_size);
// The tunnel MTU when only the HTTPS tunnel is used: outer IP + TCP, a TLS
// record's overhead and the 16-byte GP frame header off the base MTU.
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

// Writes the tunnel GET on `tls` and reads the 12-byte answer; Ok once it was
// START_TUNNEL. A refusal is an error naming the HTTP status; `cookie_rejected`
// is set for 502.
Status start_https_tunnel(io::TlsStream& tls, const gp::GpSessionCookie& cookie, const std::string& path,
                          bool* cookie_rejected = nullptr);

// Runs the tunnel until it ends; errors before traffic flows are returned as
// Error, later endings as a TunnelEnd with the reason logged.
Result<TunnelEnd> run_gp_tunnel(const GpTunnelSetup& setup, const GpTunnelOptions& options,
                                const GpGatewayLinks& links);

}  // namespace espvpn::session
