// DtlsChannel: the AnyConnect DTLS data channel, a DTLS client on GnuTLS over
// a connected UDP socket (docs/protocols/anyconnect.md §4).
//
// Two ways in, both decided by the CONNECT response:
//  - PSK-NEGOTIATE (ocserv): a 32-byte PSK exported from the CSTP TLS session
//    (export_dtls_psk), identity "psk", and the X-DTLS-App-ID in the
//    ClientHello session_id, where ocserv's main process looks for it to find
//    the worker that owns the session. Any DTLS version/AEAD both allow.
//  - legacy "resumption" (Cisco, ocserv with dtls-legacy): an abbreviated
//    handshake resuming a session that never existed, with the client-chosen
//    X-DTLS-Master-Secret, the server's X-DTLS-Session-ID and the cipher suite
//    named in X-DTLS-CipherSuite / X-DTLS12-CipherSuite. A full handshake
//    instead of the resumption means someone else answered: refused.
//
// The handshake retransmits on the same socket (ocserv ignores a repeated
// ClientHello from a new source port within 3 s) and is bounded in time. It is
// non-blocking (handshake_step + handshake_wait_ms, for an event loop) or
// blocking (handshake). GnuTLS's client takes the first datagram of the
// server's answer as the acknowledgement of its flight and stops retransmitting
// it; a server that retransmits only when it hears from the client (ocserv's
// worker) then never sends what was lost of its answer (a ServerHelloDone lost
// after its ServerHello: the handshake hung until its timeout). So while the
// answer is incomplete, the client resends its last flight itself (epoch 0
// records, renumbered as GnuTLS would) every retransmission interval, doubled
// each time, and the server answers it with its flight again (RFC 6347 4.2.4).
//
// After the handshake the datapath seals and opens whole batches: seal_batch
// turns packets (each already starting with its 1-byte AnyConnect type) into
// DTLS records appended to an output batch for one sendmmsg; open_batch
// decrypts received datagrams into an output batch. seal_batch belongs to one
// thread and open_batch to another (GnuTLS allows one sender and one receiver
// on a session at a time); each batch call makes no syscall.
//
// Records: with a DTLS 1.2 AEAD (AES-GCM, ChaCha20-Poly1305) the data records
// are sealed and opened by crypto/dtls_record with the keys GnuTLS negotiated
// (GnuTLS's per-record path costs an allocation and copies per record); a
// datagram that is not one application-data record of the current epoch
// (alerts, handshake retransmissions) still goes to GnuTLS. CBC suites and
// DTLS 0.9 stay with GnuTLS throughout.
#pragma once

#include <gnutls/gnutls.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/dtls_record.h"
#include "crypto/secret.h"
#include "src/io/packet_batch.h"

namespace espvpn::io {

class TlsStream;

inline constexpr std::string_view kDtlsPskLabel = "EXPORTER-openconnect-psk";
inline constexpr std::size_t kDtlsPskSize = 32;
inline constexpr std::size_t kDtlsMasterSecretSize = 48;
inline constexpr std::size_t kDtlsSessionIdSize = 32;  // X-DTLS-Session-ID and X-DTLS-App-ID
// Worst-case bytes a record adds to its plaintext (header 13, CBC IV 16, SHA-1
// MAC 20, padding up to 16); GCM needs 13 + 8 + 16.
inline constexpr std::size_t kDtlsMaxRecordOverhead = 13 + 16 + 20 + 16;

// The 32-byte DTLS PSK of the CSTP session (RFC 5705 exporter, no context).
// It must come from the TLS connection that carried this CONNECT.
Result<Secret> export_dtls_psk(gnutls_session_t cstp_session);
Result<Secret> export_dtls_psk(const TlsStream& cstp);

// A legacy cipher suite as named in the CONNECT headers.
struct DtlsLegacySuite {
    const char* name;
    bool dtls12_header;  // named in X-DTLS12-CipherSuite (Cisco's DTLS 1.2 list)
    gnutls_protocol_t version;
    gnutls_kx_algorithm_t kx;
    gnutls_cipher_algorithm_t cipher;
    gnutls_mac_algorithm_t mac;
    const char* priority;
};
// The suite the server chose: from X-DTLS12-CipherSuite when dtls12_header,
// else from X-DTLS-CipherSuite. Error names the unknown suite.
Result<const DtlsLegacySuite*> find_dtls_legacy_suite(std::string_view name, bool dtls12_header);
// The colon list to offer in that header (without PSK-NEGOTIATE), best first.
std::string dtls_legacy_suite_offer(bool dtls12_header);

// A fresh random X-DTLS-Master-Secret (the header value is its hex).
Result<Secret> make_dtls_master_secret();

struct DtlsPskMode {
    Secret psk;                            // export_dtls_psk of the CSTP session
    std::vector<std::uint8_t> app_id;      // X-DTLS-App-ID, 1..32 bytes (ocserv: 32)
    std::string base_priority = "NORMAL";  // the TLS priority; DTLS + PSK are forced on top
};

struct DtlsLegacyMode {
    Secret master_secret;                  // what we sent as X-DTLS-Master-Secret (48 bytes)
    std::vector<std::uint8_t> session_id;  // X-DTLS-Session-ID (32 bytes)
    const DtlsLegacySuite* suite = nullptr;
    std::size_t tunnel_mtu = 0;            // X-DTLS-MTU: records must carry this + 1
};

// The gateway's end of PSK-NEGOTIATE (tools/https-tunnel-gateway's anyconnect-gateway):
// a DTLS server answering the ClientHello already queued on a socket connected
// to the client, with the PSK it exported from that client's CSTP session.
struct DtlsPskServerMode {
    Secret psk;
    std::string base_priority = "NORMAL";
};

struct DtlsChannelOptions {
    std::variant<DtlsPskMode, DtlsLegacyMode, DtlsPskServerMode> mode;
    // X-CSTP-Base-MTU: the path MTU to the server (PSK mode derives the tunnel MTU from it).
    std::size_t base_mtu = 1500;
    bool ipv6_outer = false;
    std::chrono::milliseconds retransmit{1000};          // first retransmission (then doubled)
    std::chrono::milliseconds handshake_timeout{12000};  // the whole handshake (OC: 12 s)
};

struct DtlsSealOutcome {
    std::size_t next = 0;       // first packet of `in` not looked at (out filled up); in.size() when done
    std::size_t records = 0;    // appended to `out`
    std::size_t too_big = 0;    // plaintext larger than record_payload_mtu()
    std::size_t failed = 0;     // GnuTLS refused (not expected)
};

struct DtlsOpenOutcome {
    std::size_t records = 0;      // plaintexts appended to `out`
    std::size_t datagrams = 0;    // datagrams of `in` consumed by this call
    std::size_t discarded = 0;    // a datagram/record dropped, by us or GnuTLS (bad MAC, replay, junk)
    bool more = false;            // `out` filled up: deliver it and call again with the same `in`
    bool peer_closed = false;     // close_notify received
};

class DtlsChannel {
public:
    // `udp_fd` (non-blocking) is connected to the peer's DTLS port; it must outlive the
    // channel, and nobody else may read it during the handshake.
    static Result<std::unique_ptr<DtlsChannel>> create(int udp_fd, DtlsChannelOptions options);
    ~DtlsChannel();
    DtlsChannel(const DtlsChannel&) = delete;
    DtlsChannel& operator=(const DtlsChannel&) = delete;

    // One non-blocking handshake step: true when done, false to call again when
    // the socket is readable or handshake_wait_ms() has passed. An error ends
    // the attempt (timeout, refused, not resumed); make a new channel to retry.
    Result<bool> handshake_step();
    int handshake_wait_ms() const;
    // Loops handshake_step/poll until done or failed (bounded by handshake_timeout).
    Status handshake();
    bool established() const { return established_; }

    // Largest plaintext per record (type byte included), and the tunnel MTU it leaves.
    std::size_t record_payload_mtu() const { return record_payload_mtu_; }
    std::size_t tunnel_mtu() const;
    // "(DTLS1.2)-(PSK)-(AES-256-GCM)" for logs.
    std::string description() const;
    bool resumed() const;
    // True when our record code seals and opens the data records (not GnuTLS).
    bool records_ours() const { return sealer_.has_value(); }
    gnutls_session_t native() const { return session_; }
    int fd() const { return fd_; }

    // tx thread: seals packets [first, in.size()) of `in` into records appended
    // to `out` (slot capacity >= record size) until `out` is full.
    DtlsSealOutcome seal_batch(const PacketBatch& in, PacketBatch& out, std::size_t first = 0);
    // Any thread but concurrently with no seal_batch: one record straight to the socket.
    Status send_record(std::span<const std::uint8_t> plaintext);
    // rx thread: decrypts the datagrams of `in` (from recv_batch) into `out`,
    // one plaintext per slot. Resumes where the previous call stopped when it
    // returned more; a new `in` batch starts from its first datagram.
    Result<DtlsOpenOutcome> open_batch(const PacketBatch& in, PacketBatch& out);

private:
    DtlsChannel() = default;
    Status configure(DtlsChannelOptions& options);
    Status finish_handshake();
    void take_over_records();
    static ssize_t push(gnutls_transport_ptr_t ptr, const void* data, size_t size);
    static ssize_t pull(gnutls_transport_ptr_t ptr, void* data, size_t size);
    static int pull_timeout(gnutls_transport_ptr_t ptr, unsigned int ms);
    static int server_psk(gnutls_session_t session, const char* identity, gnutls_datum_t* key);

    gnutls_session_t session_ = nullptr;
    gnutls_psk_client_credentials_t psk_cred_ = nullptr;
    gnutls_psk_server_credentials_t psk_server_cred_ = nullptr;
    Secret server_psk_;  // DtlsPskServerMode's key, handed to GnuTLS by server_psk
    int fd_ = -1;
    bool legacy_ = false;
    bool established_ = false;
    bool heard_from_server_ = false;  // for the timeout message
    // The handshake flight the client sent last, one datagram each (resend_flight); whether
    // a datagram came after it; when a datagram last went or came; the resend interval.
    bool client_ = false;
    std::vector<std::vector<std::uint8_t>> flight_;
    bool answered_ = false;
    std::chrono::steady_clock::time_point last_io_;
    std::chrono::milliseconds first_resend_{1000};
    std::chrono::milliseconds resend_after_{1000};
    void note_sent(const void* data, std::size_t size);
    bool resend_due() const;
    void resend_flight();
    std::size_t base_mtu_ = 0;
    bool ipv6_outer_ = false;
    std::size_t legacy_tunnel_mtu_ = 0;
    std::size_t record_payload_mtu_ = 0;
    // Ours once the handshake is done, when the suite allows (records_ours()).
    std::optional<DtlsRecordSealer> sealer_;
    std::optional<DtlsRecordOpener> opener_;
    std::vector<std::uint8_t> tx_record_;  // send_record's record
    std::chrono::steady_clock::time_point handshake_deadline_;
    // Where open_batch stopped in its current input batch.
    std::size_t rx_next_ = 0;
};

}  // namespace espvpn::io
