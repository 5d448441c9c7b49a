// DTLS 1.2 application-data records with an AEAD (RFC 6347 §4.1, RFC 5246 §6.2.3.3),
// sealed and opened by us with the keys and sequence numbers a GnuTLS session
// negotiated, so the data path skips GnuTLS's per-record allocation and copies.
//
//   AES-128/256-GCM (RFC 5288): nonce = 4-byte salt from the key block ‖ 8-byte
//     explicit nonce, which travels in the record (we send epoch ‖ seq).
//   CHACHA20-POLY1305 (RFC 7905): nonce = 12-byte IV XOR (0 ‖ epoch ‖ seq), nothing explicit.
//   Record: type(1) version(2, 0xfefd) epoch(2) seq(6) length(2) | explicit nonce | ciphertext | tag(16)
//   AAD: epoch ‖ seq (8) ‖ type ‖ version ‖ plaintext length.
//
// Usage, after gnutls_handshake() succeeded:
//   auto sealer = DtlsRecordSealer::from_gnutls(session);   // error: CBC, DTLS 0.9, ... keep GnuTLS
//   std::size_t n = sealer->seal(plaintext, out_slot);      // 0: out too small or seq exhausted
//   auto opener = DtlsRecordOpener::from_gnutls(session);
//   DtlsRecordOpened r = opener->open(datagram, out_slot);  // not_ours: hand the datagram to GnuTLS
// Once a sealer took over, GnuTLS's write sequence number is stale: it must not send
// another record on that epoch. The opener keeps its own replay window, starting empty.
// Each object belongs to one thread; no allocation per record.
#pragma once

#include <gnutls/gnutls.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "protocols/base/result.h"
#include "crypto/replay_window.h"

namespace espvpn {

enum class DtlsAead : std::uint8_t { aes128_gcm, aes256_gcm, chacha20_poly1305 };

inline constexpr std::size_t kDtlsRecordHeaderSize = 13;
inline constexpr std::size_t kDtlsAeadTagSize = 16;
inline constexpr std::uint8_t kDtlsContentApplicationData = 23;
inline constexpr std::uint16_t kDtls12Version = 0xfefd;
inline constexpr std::uint64_t kDtlsMaxSeq = (std::uint64_t{1} << 48) - 1;

// Bytes a record adds to its plaintext: header, explicit nonce (GCM: 8), tag.
std::size_t dtls_record_overhead(DtlsAead aead);

// One direction's record state, as gnutls_record_get_state gives it.
struct DtlsRecordState {
    DtlsAead aead = DtlsAead::aes128_gcm;
    std::array<std::uint8_t, 32> key{};
    std::array<std::uint8_t, 12> iv{};  // GCM: the 4-byte salt, then zeros
    std::uint16_t epoch = 0;
    std::uint64_t seq = 0;  // the next to send (write state); unused for reading
    ~DtlsRecordState();
};
// The read (`read`) or write state of an established DTLS 1.2 AEAD session.
// Error (with the reason) for anything we do not seal ourselves.
Result<DtlsRecordState> dtls_record_state(gnutls_session_t session, bool read);

class DtlsRecordSealer {
public:
    static Result<DtlsRecordSealer> create(const DtlsRecordState& state);
    static Result<DtlsRecordSealer> from_gnutls(gnutls_session_t session);
    DtlsRecordSealer(DtlsRecordSealer&&) noexcept;
    DtlsRecordSealer& operator=(DtlsRecordSealer&&) noexcept;
    ~DtlsRecordSealer();

    std::size_t overhead() const { return dtls_record_overhead(aead_); }
    std::uint16_t epoch() const { return epoch_; }
    std::uint64_t next_seq() const { return seq_; }

    // Writes one application-data record carrying `plaintext` to the front of `out`
    // (out of place: plaintext and out must not overlap) and returns its size. 0 when
    // out is too small, the plaintext exceeds 2^14, the sequence numbers are used up
    // (the last one, 2^48-1, is never sent), or the cipher refused; seq then stays.
    std::size_t seal(std::span<const std::uint8_t> plaintext, std::span<std::uint8_t> out) noexcept;

    struct Impl;

private:
    DtlsRecordSealer(DtlsAead aead, std::uint16_t epoch, std::uint64_t seq, std::unique_ptr<Impl> impl);
    DtlsAead aead_;
    std::uint16_t epoch_;
    std::uint64_t seq_;
    std::unique_ptr<Impl> impl_;
};

enum class DtlsOpenStatus : std::uint8_t {
    ok,
    not_ours,    // not one application-data record of our epoch and version filling the
                 // datagram (an alert, a handshake message, two records, junk): GnuTLS's
    bad_length,  // too short for nonce + tag, or `out` cannot hold the plaintext
    replayed,    // seen before, or behind the replay window
    bad_tag,     // forged or corrupted
};
struct DtlsRecordOpened {
    DtlsOpenStatus status = DtlsOpenStatus::not_ours;
    std::size_t length = 0;  // plaintext bytes at the front of `out` when ok
};

class DtlsRecordOpener {
public:
    static Result<DtlsRecordOpener> create(const DtlsRecordState& state);
    static Result<DtlsRecordOpener> from_gnutls(gnutls_session_t session);
    DtlsRecordOpener(DtlsRecordOpener&&) noexcept;
    DtlsRecordOpener& operator=(DtlsRecordOpener&&) noexcept;
    ~DtlsRecordOpener();

    std::uint16_t epoch() const { return epoch_; }

    // Opens `datagram` (one whole UDP payload) into `out` (out of place, no overlap).
    // The replay window moves only for a record whose tag verified.
    DtlsRecordOpened open(std::span<const std::uint8_t> datagram, std::span<std::uint8_t> out) noexcept;

    struct Impl;

private:
    DtlsRecordOpener(DtlsAead aead, std::uint16_t epoch, std::unique_ptr<Impl> impl);
    DtlsAead aead_;
    std::uint16_t epoch_;
    ReplayWindow window_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace espvpn
