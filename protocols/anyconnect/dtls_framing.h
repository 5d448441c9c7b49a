// The AnyConnect DTLS channel's packet format (docs/protocols/anyconnect.md §4.1): each
// DTLS application record carries one packet, a 1-byte type and its payload.
// The type numbers are those of CSTP (0 data, 3/4 DPD request/response,
// 5 disconnect, 7 keepalive, 8 compressed data, 9 terminate). Unlike CSTP, an
// unknown type on DTLS is dropped, not fatal (some stacks hand up garbage for
// reordered records). Also: the tunnel-MTU arithmetic of docs/protocols/anyconnect.md §7.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace espvpn::anyconnect {

enum class DtlsPacketType : std::uint8_t {
    data = 0x00,
    dpd_request = 0x03,
    dpd_response = 0x04,
    disconnect = 0x05,
    keepalive = 0x07,
    compressed = 0x08,
    terminate = 0x09,
};

inline constexpr std::size_t kDtlsPacketHeaderSize = 1;

// What a received record is, for the receive pipeline to act on.
enum class DtlsRecordKind : std::uint8_t {
    data,           // payload = one IP packet
    dpd_request,    // answer with a DPD response carrying the same payload
    dpd_response,
    keepalive,
    disconnect,     // the server ends the session (disconnect or terminate)
    dropped,        // see DtlsRecordDrop
};

enum class DtlsRecordDrop : std::uint8_t {
    none,
    empty,          // a record without even the type byte
    not_ip,         // data whose first nibble is neither 4 nor 6
    compressed,     // compression was never offered, so the server must not send it
    unknown_type,
};
const char* describe(DtlsRecordDrop drop);

struct DtlsRecord {
    DtlsRecordKind kind = DtlsRecordKind::dropped;
    DtlsRecordDrop drop = DtlsRecordDrop::none;
    std::span<const std::uint8_t> payload;  // after the type byte (into the input)
};

// Classifies one decrypted record. Never reads outside `record`.
DtlsRecord parse_dtls_record(std::span<const std::uint8_t> record);

// Writes [type][payload] into `out`; returns the bytes written, 0 if it does
// not fit. `payload` may alias out.subspan(1) (the bytes are moved, not copied
// forwards), so a DPD request can be answered in place.
std::size_t write_dtls_packet(DtlsPacketType type, std::span<const std::uint8_t> payload,
                              std::span<std::uint8_t> out);

}  // namespace espvpn::anyconnect
