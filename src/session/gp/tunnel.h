// The GlobalProtect tunnel, once logged in: tun device, host configuration
// (built-in or vpnc-script), and the transport that carries the packets:
//
//   ESP over UDP (datapath/EspDatapath) while its probe is answered, with DPD and
//   rekey (a new getconfig whose SAs are installed beside the old ones);
//   the HTTPS tunnel (datapath/GpHttpsDatapath, GET ssl-tunnel-connect on the
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
// reconnects; no new login (the session cookie is reused). Every getconfig and TLS connection
// after the first runs on the session core's attempt thread (cancellable); the datapaths never
// wait for the control thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "protocols/base/result.h"
#include "protocols/gp/session_cookie.h"
#include "src/io/tls_stream.h"
#include "src/session/gp/tunnel_setup.h"
#include "src/session/tunnel_session.h"

namespace espvpn::session {

// A new getconfig (reconnect, rekey, or fresh ESP keys after the HTTPS tunnel
// voided the old ones); runs on the session's attempt thread.
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
    // The fd that cancels every wait of refetch/connect from now on (-1: none): the
    // attempt thread's, so a quit does not wait for a blackholed gateway.
    std::function<void(int)> set_cancel_fd;
    // SIGINT/SIGTERM while a transport runs: the logout request (the tunnel is still up).
    // Not called during an outage: a blackholed gateway would hold the exit for its timeout.
    std::function<void()> logout;
};


// Writes the tunnel GET on `tls` and reads the 12-byte answer; Ok once it was
// START_TUNNEL. A refusal is an error naming the HTTP status; `cookie_rejected`
// is set for 502.
Status start_https_tunnel(io::TlsStream& tls, const gp::GpSessionCookie& cookie, const std::string& path,
                          bool* cookie_rejected = nullptr);

// Runs the tunnel through the session core (tunnel_session.h) until it ends;
// errors before traffic flows are returned as Error, later endings as a
// TunnelEnd with the reason logged.
Result<TunnelEnd> run_gp_tunnel(const GpTunnelSetup& setup, const TunnelOptions& options, const GpGatewayLinks& links);

}  // namespace espvpn::session
