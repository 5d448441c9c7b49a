// One AnyConnect connection of a session (tunnel.h has the whole picture):
// CstpLink = a TLS connection that took the CONNECT, its reply, the pump threads
// on it and the DTLS channel keyed from it; connect_cstp_link = the making of a
// new one (TCP + TLS + CONNECT) on a LinkAttempt's thread, cancellable at any
// point; TunDrain = the tun's reader while no link exists.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/anyconnect/connect.h"
#include "protocols/tunnel/dpd_timer.h"
#include "src/io/packet_batch.h"
#include "src/io/tls_stream.h"
#include "src/io/tun_device.h"
#include "src/datapath/tls/tls_pump.h"
#include "src/session/anyconnect/tunnel.h"

namespace espvpn::session {

// Counter sums over the connections of a session (CSTP's: TlsTunnelStats::add).
// The counters of a DTLS channel that has ended, kept for the session's totals.
void add_dtls_history(AcDtlsStats& sum, const AcDtlsStats& d);

// While no connection exists, packets from the tun are read and dropped (and
// counted), so nothing waits on a full tun queue and the stats show the loss.
class TunDrain {
public:
    TunDrain(io::TunDevice& tun, int mtu);
    ~TunDrain();
    TunDrain(const TunDrain&) = delete;
    TunDrain& operator=(const TunDrain&) = delete;
    std::uint64_t dropped() const { return dropped_; }

private:
    void run();
    io::TunDevice& tun_;
    io::PacketBatch batch_;
    std::atomic<bool> stopping_{false};
    std::atomic<std::uint64_t> dropped_{0};
    std::thread thread_;
};

// Outlived by the session (tun, host, signals, reconnect policy), which replaces
// it on a reconnect or a new-tunnel rekey.
class CstpLink {
public:
    // What the DTLS channel needs from the session.
    struct DtlsSetup {
        const TunnelOptions* options = nullptr;  // null: no DTLS (--no-dtls)
        std::string peer_address;
        const Secret* master_secret = nullptr;
        int base_mtu = 0;
    };

    // The CONNECT on a TLS connection (the login's kept one the first time);
    // `refusal` gets the reply's status.
    static Result<std::unique_ptr<CstpLink>> connect_on(std::unique_ptr<io::TlsStream> stream, const Secret& request,
                                                        anyconnect::AcConnectRefusal& refusal);
    ~CstpLink() { stop(); }
    CstpLink(const CstpLink&) = delete;
    CstpLink& operator=(const CstpLink&) = delete;

    const anyconnect::AcCstpConfig& reply() const { return reply_; }
    io::TlsStream& tls() { return *tls_; }

    // The pump on the tun, then the DTLS channel (before the pump threads: its
    // factory exports the PSK from the TLS session they are about to use).
    void start(io::TunDevice& tun, int mtu, const DtlsSetup& dtls);
    // After a TLS rehandshake (both pump threads parked): a fresh PSK, so a new
    // DTLS channel (docs/protocols/anyconnect.md §6: DTLS is re-established whenever CSTP is rehandshaken).
    // Returns the old one, for the caller to end once the pump runs again (its
    // datapath threads take a while to stop; the tun should not wait for them).
    std::unique_ptr<AcDataChannel> renew_channel(int mtu);
    // The BYE (the server ends the session), waited for up to 1 s.
    void logout();
    // Stops the threads and closes the connection; without a logout() first, the
    // server keeps the session for the next CONNECT. The channel's counters go to `history`.
    void stop(AcDtlsStats* history = nullptr);

    datapath::TlsPump* pump() { return pump_.get(); }
    AcDataChannel* channel() const { return channel_.get(); }
    datapath::TlsTunnelStats cstp_stats() const { return pump_ ? pump_->stats() : stopped_cstp_; }

    // Control-thread state of this connection.
    std::optional<DpdTimer> dpd;  // DPD and keepalive, from the pump's stamps (set at the first step)
    std::chrono::steady_clock::time_point rekey_at = std::chrono::steady_clock::time_point::max();
    bool fallback_started = false;  // a failed rehandshake's new connection is being made

private:
    explicit CstpLink(std::unique_ptr<io::TlsStream> tls) : tls_(std::move(tls)) {}
    void open_channel(int mtu);

    std::unique_ptr<io::TlsStream> tls_;
    anyconnect::AcCstpConfig reply_;
    std::vector<std::uint8_t> early_bytes_;
    DtlsSetup dtls_;
    io::TunDevice* tun_ = nullptr;
    std::unique_ptr<datapath::TlsPump> pump_;
    std::unique_ptr<AcDataChannel> channel_;
    datapath::TlsTunnelStats stopped_cstp_;
};

// Where a new connection goes.
struct CstpLinkTarget {
    std::string host;        // verified against the certificate (and sent as SNI)
    std::uint16_t port = 0;
    std::string address;     // numeric: the session's first connection's, so no resolver is asked
    std::shared_ptr<const io::TlsCredentials> credentials;
};

// A new TLS connection + CONNECT, for a LinkAttempt's thread: every wait inside
// ends at once when `cancel_fd` turns readable. `refusal` gets the reply's status.
Result<std::unique_ptr<CstpLink>> connect_cstp_link(const CstpLinkTarget& target, const Secret& request, int cancel_fd,
                                                    anyconnect::AcConnectRefusal& refusal);

}  // namespace espvpn::session
