// The GlobalProtect tunnel, once logged in: tun device, host configuration
// (built-in or vpnc-script), and the transport that carries the packets:
//
//   ESP over UDP (datapath/EspDatapath) while its probe is answered, with DPD and
//   rekey (a new getconfig whose SAs are installed beside the old ones);
//   the HTTPS tunnel (datapath/TlsPump with GP framing, GET ssl-tunnel-connect on the
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

#include "protocols/base/result.h"
#include "src/session/gp/hip_renewal.h"
#include "src/session/gp/tunnel_setup.h"
#include "src/session/tunnel_session.h"

namespace espvpn::session {

// Runs the tunnel through the session core (tunnel_session.h) until it ends;
// errors before traffic flows are returned as Error, later endings as a
// TunnelEnd with the reason logged. `gateway` makes every later getconfig and
// TLS connection (its HttpsClient's kept-alive one first); a logout on
// SIGINT/SIGTERM while a transport runs leaves its outcome in `logout`.
// `hip`: the periodic HIP check (hip_renewal.h) while the tunnel runs; null: none.
Result<TunnelEnd> run_gp_tunnel(const GpTunnelSetup& setup, const TunnelOptions& options, GpGatewaySession& gateway,
                                Status& logout, const HipRenewalPlan* hip = nullptr);

}  // namespace espvpn::session
