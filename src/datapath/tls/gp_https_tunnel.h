// GpHttpsDatapath: the GlobalProtect HTTPS fallback tunnel's two packet
// pipelines, one thread each, on one TLS session (GnuTLS allows one sending and
// one receiving thread per session):
//
//   tls-tx: tun read (TSO split) -> 16-byte GP frame header in the slot's
//           headroom -> one TLS record per frame, gathered, one send()
//   tls-rx: TLS records -> GpFrameDecoder -> packets copied into a batch
//           -> GRO coalesce -> tun write
// Both halves are shared with AnyConnect's CSTP (tls_framed.h): the protocols
// differ in their frame header and control frames (GP: the keepalive).
//
// Started once "START_TUNNEL" was read; the gateway echoes send_keepalive()'s
// frame, so any frame received counts as life (last_rx()).
//
// Memory is fixed at start: a full TCP send buffer stalls the send thread (the
// tun queue then fills and the kernel drops), it never queues more here.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "protocols/base/result.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/datapath/tls/tls_framed.h"
#include "src/io/tls_record_batcher.h"
#include "src/io/tls_stream.h"
#include "src/io/tun_device.h"

namespace espvpn::datapath {

struct GpHttpsDatapathOptions : TlsFramedOptions {
    // Largest incoming frame payload; a larger one is a fatal stream error (OC
    // reads with max(16384, MTU)).
    std::size_t max_frame_payload = 16384;
};

class GpHttpsSender;
class GpHttpsReceiver;

class GpHttpsDatapath {
public:
    // Starts both threads on `tls`, which must have been switched to tunnel
    // mode (START_TUNNEL read). tun must outlive the GpHttpsDatapath and must not
    // be used by anyone else while it runs.
    static Result<std::unique_ptr<GpHttpsDatapath>> start(io::TunDevice& tun, std::unique_ptr<io::TlsStream> tls,
                                                        const GpHttpsDatapathOptions& options);
    // The same on a GnuTLS session the caller owns (connected on `fd`), which must
    // outlive the GpHttpsDatapath; stop() then leaves closing it to the caller.
    static Result<std::unique_ptr<GpHttpsDatapath>> start(io::TunDevice& tun, gnutls_session_t session, int fd,
                                                        const GpHttpsDatapathOptions& options);
    ~GpHttpsDatapath();
    GpHttpsDatapath(const GpHttpsDatapath&) = delete;
    GpHttpsDatapath& operator=(const GpHttpsDatapath&) = delete;

    // Stops and joins both threads, then closes the TLS connection (idempotent).
    void stop();
    // Asks the send thread to send one keepalive frame.
    void send_keepalive();

    HttpsStats stats() const;
    // When the last frame (data or keepalive) arrived; epoch = never.
    std::chrono::steady_clock::time_point last_rx() const;
    // Empty while both threads run; the reason when one stopped.
    std::optional<std::string> failure() const;

private:
    GpHttpsDatapath();
    std::unique_ptr<io::TlsStream> tls_;
    std::unique_ptr<HttpsCounters> counters_;
    std::unique_ptr<io::TlsRecordBatcher> batcher_;
    PipelinePair<GpHttpsSender, GpHttpsReceiver> pipes_;
};

}  // namespace espvpn::datapath
