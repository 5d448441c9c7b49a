// The AnyConnect tunnel once logged in (docs/protocols/anyconnect.md §2, §3, §5): CONNECT on the
// login's kept TLS connection, the reply turned into a TunnelConfig, the host
// side set up (tun + netlink or vpnc-script, src/host/tunnel_host.h), then
// packets carried tun <-> CSTP on two threads while the control thread answers
// signals and runs DPD/keepalive, until a logout, a detach or the server ends it.
//
// Two layers: a CstpLink (cstp_link.h) is one connected transport (TLS +
// CONNECT reply + pump threads + DTLS channel); the session core
// (../tunnel_session.h: tun, host, signals, stats reporter, outage) outlives it and
// this driver steps it. Every later connection is made on a LinkAttempt's thread, so the control loop
// keeps serving signals and DPD, and a quit cancels a pending attempt at once. When the TLS connection fails
// or closes without DISCONNECT/TERMINATE, or CSTP DPD finds 2 x DPD of silence,
// the link goes, the tun stays (its packets dropped and counted), the
// `attempt-reconnect` script is queued and new TLS connections + CONNECT with the
// same cookie follow (1 s, doubling to 10 s) until --reconnect-timeout; a 401 ends
// it (cookie_rejected). SIGUSR2 and the "new-tunnel" rekey make the new link
// before the old one goes; if it cannot be made, the old one stays (a rekey is
// tried again later). The "ssl" rekey renegotiates the live TLS session
// (pump threads parked) and then re-establishes DTLS with the new PSK; a failed
// rehandshake falls back to a new tunnel. DTLS rekeys itself by a new handshake
// at X-DTLS-Rekey-Time (dtls_channel.cpp). The addresses must stay the same
// across connections (the session ends otherwise); an MTU change is applied.
//
// DTLS: when the server offers DTLS (and no --no-dtls), the tunnel opens an
// AcDataChannel (dtls_channel.h) from the CSTP session (its TLS session exports the PSK) and the
// DTLS parameters; while that channel says it carries data, the tx thread hands
// it the data packets instead of writing CSTP frames. CSTP keeps its own DPD,
// keepalive and BYE meanwhile (ocserv drops a session whose TLS side is silent
// for 3 x DPD, docs/protocols/anyconnect.md §5); the channel runs DPD on DTLS itself.
//
// MTU: one tun for both channels. The tun comes up at once with X-CSTP-MTU
// (data flows over CSTP during the handshake, unlike openconnect, which delays
// the tun until DTLS settles); when DTLS comes up with a smaller tunnel MTU the
// tun is lowered to it and stays there after a fallback, so TCP never sees the
// MTU grow and shrink. Against ocserv both are equal: its X-CSTP-MTU already
// subtracts the DTLS overhead (docs/protocols/anyconnect.md §7.2).
#pragma once

#include <gnutls/gnutls.h>

#include <string>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/anyconnect/connect.h"
#include "src/datapath/dtls/dtls_datapath.h"
#include "src/datapath/tls/tls_pump.h"
#include "src/io/https_client.h"
#include "src/io/packet_batch.h"
#include "src/session/anyconnect/login.h"
#include "protocols/tunnel/tunnel_config.h"
#include "src/host/tunnel_host.h"
#include "src/session/tunnel_session.h"

namespace espvpn::session {

// What a DTLS channel is built from.
struct AcDtlsContext {
    gnutls_session_t cstp_session = nullptr;  // alive as long as the channel; export "EXPORTER-openconnect-psk"
    std::string peer_address;                  // numeric address of the TLS peer; UDP port in params
    anyconnect::AcDtlsParams params;
    const Secret* master_secret = nullptr;     // the 48 bytes offered in X-DTLS-Master-Secret (legacy mode)
    int base_mtu = 0;                          // X-CSTP-Base-MTU (0: unknown)
    int tunnel_mtu = 0;                        // the tun's MTU now
    io::TunDevice* tun = nullptr;              // for ICMP "too big" answers and lowering the MTU (may be null)
};

// What the DTLS channel did so far (for --stats-json / SIGUSR1).
struct AcDtlsStats {
    bool carrying = false;                    // data goes over DTLS now
    bool disabled = false;                    // no more attempts (retry 0, or a legacy server that did not resume)
    std::string mode;                         // "psk" / "legacy"
    std::string description;                  // the last established session, e.g. (DTLS1.2)-(PSK)-(AES-256-GCM)
    std::uint64_t tunnel_mtu = 0;             // of the last established session
    std::uint64_t handshakes = 0;             // completed
    std::uint64_t handshake_failures = 0;
    std::uint64_t transport_switches = 0;     // CSTP <-> DTLS changes
    std::uint64_t rekeys = 0;                 // sessions replaced at X-DTLS-Rekey-Time
    datapath::DtlsDatapathStats totals;       // every DTLS datapath of this tunnel, summed
};

// A data carrier beside CSTP (the DTLS channel). It runs its own threads
// (handshake, receive into the sink, DPD); the tunnel only asks it to send.
class AcDataChannel : public datapath::PacketCarrier {
public:
    virtual AcDtlsStats stats() const = 0;
};

// Runs the tunnel over `https`'s kept connection to auth.server (a new one if
// none), through the session core (tunnel_session.h), until it ends. Errors
// before the tunnel is up are returned as Error, except a rejected cookie.
Result<TunnelEnd> run_ac_tunnel(io::HttpsClient& https, const AcAuthenticated& auth, const TunnelOptions& options);

}  // namespace espvpn::session
