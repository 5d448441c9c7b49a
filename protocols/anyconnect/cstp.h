// CSTP framing (docs/protocols/anyconnect.md §3): after "200 CONNECTED" every packet on the TLS
// stream, both ways, is an 8-byte header and a payload:
//
//   0  4  'S' 'T' 'F' 0x01
//   4  2  payload length, big-endian
//   6  1  type (CstpType)
//   7  1  0
//
// Peers write one packet per TLS record; the decoder does not rely on it and
// reassembles packets from the byte stream however it is cut.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/framing/frame_splitter.h"

namespace espvpn::anyconnect {

inline constexpr std::size_t kCstpHeaderSize = 8;
inline constexpr std::size_t kCstpMaxPayload = 16384;  // OC reserves this much per packet

// The same numbers are used as the 1-byte header on the DTLS channel.
enum class CstpType : std::uint8_t {
    data = 0x00,
    dpd_request = 0x03,
    dpd_response = 0x04,
    disconnect = 0x05,
    keepalive = 0x07,
    compressed_data = 0x08,
    terminate = 0x09,
};
const char* describe(CstpType type);

// The first byte of a DISCONNECT payload that ends the session for good (logout).
inline constexpr std::uint8_t kDisconnectLogout = 0xb0;

using CstpHeader = std::array<std::uint8_t, kCstpHeaderSize>;
CstpHeader cstp_header(CstpType type, std::uint16_t payload_len);
// Writes the header into out[0..8).
void write_cstp_header(CstpType type, std::uint16_t payload_len, std::uint8_t* out);

// DISCONNECT with 0xb0 + reason: what openconnect sends on SIGINT (a logout).
std::vector<std::uint8_t> cstp_logout_packet(std::string_view reason);

struct CstpPacket {
    CstpType type;
    // Points into the caller's input (whole packet at hand) or into the
    // decoder's buffer; valid until the next call to next().
    std::span<const std::uint8_t> payload;
};

// Splits the TLS byte stream into packets. Checks magic, byte 7 and the type;
// compressed data is refused (never negotiated). Any bad header puts the
// decoder into a failed state for good: the stream cannot be resynchronised.
class CstpDecoder {
public:
    explicit CstpDecoder(std::size_t max_payload = kCstpMaxPayload);

    // Consumes bytes from the front of `input` until a packet is complete
    // (returned) or the input runs out (nullopt, all consumed).
    Result<std::optional<CstpPacket>> next(std::span<const std::uint8_t>& input);

    bool failed() const { return failed_; }
    std::size_t pending() const { return splitter_.pending(); }  // bytes of an incomplete packet held

private:
    struct HeaderInfo {
        CstpType type;
        std::size_t payload_len;
    };
    Result<std::optional<CstpPacket>> fail(std::string message);
    Result<HeaderInfo> check_header(std::span<const std::uint8_t> h) const;

    framing::FrameSplitter<HeaderInfo> splitter_;
    std::size_t max_payload_;
    bool failed_ = false;
};

}  // namespace espvpn::anyconnect
