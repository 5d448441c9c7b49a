// The HTTPS fallback tunnel (docs/protocols/globalprotect.md §9): the connect request, the
// START_TUNNEL reply, and the 16-byte frame around each IP packet on the TLS
// stream.
//
//   0   4  magic 1a 2b 3c 4d
//   4   2  EtherType, big-endian: 0x0800 IPv4, 0x86DD IPv6, 0 keepalive
//   6   2  payload length, big-endian
//   8   8  01 00 00 00 00 00 00 00 for data, all zero for keepalive
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/framing/frame_splitter.h"
#include "protocols/gp/session_cookie.h"

namespace espvpn::gp {

// The exact bytes to write on a fresh TLS connection: OC sends
// "GET <url>?authcookie=..&user=.. HTTP/1.1\r\n\r\n" and no headers at all.
Secret tunnel_connect_request(const GpSessionCookie& cookie,
                              std::string_view tunnel_url = "/ssl-tunnel-connect.sslvpn");

inline constexpr std::size_t kTunnelReplySize = 12;  // read exactly this many bytes

struct GpTunnelRefusal {
    int http_status = 0;  // 0 when the bytes were not an HTTP status line
    bool cookie_rejected() const { return http_status == 502; }
};
// Ok when the 12 bytes are "START_TUNNEL"; otherwise an error whose message
// names the HTTP status (502 = cookie rejected, fatal), with the status in
// `refusal` when given.
Status check_tunnel_reply(std::span<const std::uint8_t> first_bytes,
                          GpTunnelRefusal* refusal = nullptr);

inline constexpr std::size_t kFrameHeaderSize = 16;
inline constexpr std::array<std::uint8_t, 4> kFrameMagic{0x1a, 0x2b, 0x3c, 0x4d};

enum class GpFrameType : std::uint16_t { Keepalive = 0, Ipv4 = 0x0800, Ipv6 = 0x86DD };

using GpFrameHeader = std::array<std::uint8_t, kFrameHeaderSize>;

GpFrameHeader encode_frame_header(GpFrameType type, std::uint16_t payload_len);
// The header for an IP packet, typed by its version nibble; error for an
// empty packet, a version other than 4/6, or one longer than 65535 bytes.
Result<GpFrameHeader> frame_header_for_packet(std::span<const std::uint8_t> packet);
inline const GpFrameHeader kKeepaliveFrame = encode_frame_header(GpFrameType::Keepalive, 0);

struct GpFrameInfo {
    GpFrameType type;
    std::uint16_t payload_len;
};
// Checks magic, EtherType, the fixed bytes 8..15 and that a keepalive is empty.
Result<GpFrameInfo> decode_frame_header(std::span<const std::uint8_t, kFrameHeaderSize> header);

struct GpFrame {
    GpFrameType type;
    // Points into the caller's input (whole frame at hand) or into the
    // decoder's buffer (frame split across inputs); valid until the next call
    // to next() and while the caller's input buffer is unchanged.
    std::span<const std::uint8_t> payload;
};

// Splits a TLS byte stream into frames, however the stream is cut. Its
// buffer is allocated once; a bad frame puts it into a failed state for good
// (OC treats a bad frame as fatal: the stream can't be resynchronised).
class GpFrameDecoder {
public:
    explicit GpFrameDecoder(std::size_t max_payload = 16384);

    // Consumes bytes from the front of `input` until a frame is complete
    // (returned) or the input runs out (nullopt, all of it consumed).
    Result<std::optional<GpFrame>> next(std::span<const std::uint8_t>& input);

    bool failed() const { return failed_; }
    // Bytes of an incomplete frame held (for "EOF in the middle of a frame").
    std::size_t pending() const { return splitter_.pending(); }

private:
    Result<GpFrameInfo> check_header(std::span<const std::uint8_t> header) const;
    Result<std::optional<GpFrame>> fail(std::string message);

    framing::FrameSplitter<GpFrameInfo> splitter_;
    std::size_t max_payload_;
    bool failed_ = false;
};

}  // namespace espvpn::gp
