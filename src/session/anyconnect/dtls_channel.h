// AcDtlsChannel: the AnyConnect tunnel's DTLS data channel (docs/protocols/anyconnect.md
// §4, §5, §8), the AcDataChannel a CstpLink opens when the server offers DTLS.
//
// One supervisor thread per tunnel: handshake (bounded, off the control
// thread, so CSTP carries the traffic meanwhile), then a DtlsDatapath in
// session mode (the CSTP tx thread keeps reading the tun and hands batches to
// send(); received packets go to the tunnel's sink), DPD/keepalive on DTLS by
// DpdTimer (protocols/tunnel/dpd_timer.h). When DTLS dies (2 x DPD silent, a send error, a
// datapath failure) data falls back to CSTP and a new handshake starts at once;
// a failed handshake is retried --esp-retry-interval after the previous attempt
// began (OC: 60 s; 0: no retry). PSK mode when the server chose PSK-NEGOTIATE, else legacy resumption;
// a legacy server that does not resume (possible MITM) disables DTLS for good.
#pragma once

#include <memory>

#include "src/session/anyconnect/tunnel.h"

namespace espvpn::session {

// Starts the channel's thread; received data goes to `sink`. `options` (--dtls-local-port,
// --esp-retry-interval, --force-dpd) must outlive the channel.
Result<std::unique_ptr<AcDataChannel>> open_ac_dtls_channel(const AcDtlsContext& context, datapath::PacketSink& sink,
                                                            const TunnelOptions& options);

}  // namespace espvpn::session
