// AcDtlsChannel: the AnyConnect tunnel's DTLS data channel (docs/protocols/anyconnect.md
// §4, §5, §8), the AcDataChannel behind run_ac_tunnel's DTLS seam.
//
// One supervisor thread per tunnel: handshake (bounded, off the control
// thread, so CSTP carries the traffic meanwhile), then a DtlsDatapath in
// session mode (the CSTP tx thread keeps reading the tun and hands batches to
// send(); received packets go to the tunnel's sink), DPD/keepalive on DTLS by
// DpdTimer (protocols/tunnel/dpd_timer.h). When DTLS dies (2 x DPD silent, a send error, a
// datapath failure) data falls back to CSTP and a new handshake starts at once;
// a failed handshake is retried `retry` after the previous attempt began (OC:
// 60 s). PSK mode when the server chose PSK-NEGOTIATE, else legacy resumption;
// a legacy server that does not resume (possible MITM) disables DTLS for good.
#pragma once

#include <chrono>

#include "src/session/anyconnect/tunnel.h"

namespace espvpn::session {

struct AcDtlsChannelOptions {
    int local_port = 0;                               // --dtls-local-port (0: any)
    std::chrono::seconds retry{60};                   // --esp-retry-interval; 0: no retry after a failure
    std::chrono::milliseconds handshake_timeout{12000};  // OC: 12 s
    int force_dpd_s = 0;                              // --force-dpd (overrides X-DTLS-DPD)
};

// The factory run_ac_tunnel calls when the server offers DTLS.
AcDtlsFactory make_ac_dtls_factory(const AcDtlsChannelOptions& options);

}  // namespace espvpn::session
