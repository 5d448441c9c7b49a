// TLS application-data records with an AEAD, opened by us with the read keys and
// sequence number of a GnuTLS session, so the receive path skips GnuTLS's copies and
// per-record allocation (the send side stays GnuTLS's). The AEAD itself is the one
// crypto/dtls_record uses (crypto/record_aead.h).
//
//   TLS 1.2 AES-128/256-GCM (RFC 5288): nonce = 4-byte salt ‖ the record's 8-byte explicit
//     nonce; AAD = seq ‖ type ‖ version ‖ plaintext length.
//   TLS 1.2 CHACHA20-POLY1305 (RFC 7905): nonce = IV XOR seq, nothing explicit; AAD as GCM.
//   TLS 1.3 (RFC 8446 §5.2): nonce = IV XOR seq; AAD = the 5-byte header; the plaintext
//     ends with the inner content type and zero padding.
// Anything else (CBC suites, TLS 1.0/1.1, other AEADs) stays GnuTLS's: from_gnutls fails.
//
// The opener never destroys its input (out of place): a record it does not take (not
// application data, or it does not open) goes to GnuTLS intact. Its sequence number
// advances only for the records it opened; hand one to GnuTLS with
// gnutls_record_set_state(session, 1, seq) first, and reload() after (keys change after
// a KeyUpdate or a renegotiation). No allocation per record; one thread.
#pragma once

#include <gnutls/gnutls.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "crypto/dtls_record.h"
#include "protocols/base/result.h"

namespace espvpn {

inline constexpr std::size_t kTlsRecordHeaderSize = 5;
inline constexpr std::uint8_t kTlsContentApplicationData = 23;
// Largest ciphertext a record may carry (RFC 5246 §6.2.3: 2^14 + 2048), what we wait for.
inline constexpr std::size_t kTlsMaxCiphertext = 16384 + 2048;

enum class TlsOpenStatus : std::uint8_t {
    ok,
    not_ours,  // not application data (TLS 1.2: outer type; TLS 1.3: inner type), another
               // version, or a shape we do not open: GnuTLS's, seq unchanged
    bad,       // fails to open (tag, length, all-zero TLS 1.3 plaintext): GnuTLS's too, for its alert
};
struct TlsRecordOpened {
    TlsOpenStatus status = TlsOpenStatus::not_ours;
    std::size_t length = 0;  // plaintext bytes at the front of `out` when ok (may be 0)
};

class TlsRecordOpener {
public:
    // The read state of an established TLS 1.2/1.3 AEAD session; an error (the reason)
    // for anything we leave to GnuTLS.
    static Result<TlsRecordOpener> from_gnutls(gnutls_session_t session);
    TlsRecordOpener(TlsRecordOpener&&) noexcept;
    TlsRecordOpener& operator=(TlsRecordOpener&&) noexcept;
    ~TlsRecordOpener();

    // Re-reads keys and sequence number (after GnuTLS took records); the cipher is set
    // up again only when the key changed. An error: the session left our AEADs.
    Status reload(gnutls_session_t session);

    std::uint64_t seq() const { return seq_; }  // the next record's
    bool tls13() const { return tls13_; }
    std::string describe() const;  // "TLS1.3 AES-256-GCM"

    // Opens one whole record (header + body, as `record`) into `out` (no overlap).
    TlsRecordOpened open(std::span<const std::uint8_t> record, std::span<std::uint8_t> out) noexcept;

    struct Impl;

private:
    TlsRecordOpener(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
    DtlsAead aead_ = DtlsAead::aes128_gcm;
    bool tls13_ = false;
    std::uint64_t seq_ = 0;
};

}  // namespace espvpn
