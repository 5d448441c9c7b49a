// Segmentation offload between the tun device and the packet path, as pure
// functions over bytes (no syscalls, fuzzable).
//
//  - split_super_packet: a TSO/USO super-packet read from a tun with
//    IFF_VNET_HDR, described by its virtio_net_hdr, becomes MTU-sized IP
//    packets with correct lengths, IDs, TCP sequence/flags and checksums.
//  - GroCoalescer: a batch of received inner packets becomes fewer, larger
//    packets (same TCP/UDP flow, contiguous), each with a virtio_net_hdr
//    prepended, for one tun writev each: the head packet's headers are
//    rewritten in place and the merged packets' payloads are gathered where
//    they lie (no payload is copied).
//
// Every header is validated; malformed input is rejected with a reason and
// never read past its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <sys/uio.h>

#include "src/io/packet_batch.h"

namespace espvpn::io {

// struct virtio_net_hdr (legacy, 10 bytes, native endian as tun uses it).
struct VirtioNetHdr {
    static constexpr std::uint8_t kFlagNeedsCsum = 1;
    static constexpr std::uint8_t kFlagDataValid = 2;
    static constexpr std::uint8_t kGsoNone = 0;
    static constexpr std::uint8_t kGsoTcpV4 = 1;
    static constexpr std::uint8_t kGsoUdp = 3;  // UFO, legacy; rejected
    static constexpr std::uint8_t kGsoTcpV6 = 4;
    static constexpr std::uint8_t kGsoUdpL4 = 5;  // USO (Linux >= 6.2)
    static constexpr std::uint8_t kGsoEcn = 0x80;

    std::uint8_t flags = 0;
    std::uint8_t gso_type = kGsoNone;
    std::uint16_t hdr_len = 0;
    std::uint16_t gso_size = 0;
    std::uint16_t csum_start = 0;
    std::uint16_t csum_offset = 0;
};
constexpr std::size_t kVirtioNetHdrSize = 10;

// False when bytes is shorter than the header.
bool parse_virtio_net_hdr(std::span<const std::uint8_t> bytes, VirtioNetHdr& out);
void write_virtio_net_hdr(const VirtioNetHdr& hdr, std::uint8_t* out);

enum class OffloadError : std::uint8_t {
    none,
    truncated,              // packet shorter than its headers say
    bad_ip_version,
    ipv4_options,           // IHL != 5: not handled
    ipv4_fragment,
    ipv6_extension_headers, // next header is neither TCP nor UDP
    bad_l4_protocol,        // gso_type does not match the packet's protocol
    bad_tcp_header,         // data offset < 5 or beyond the packet
    hdr_len_beyond_packet,
    gso_size_zero,
    gso_without_csum,       // GSO packets must carry NEEDS_CSUM
    bad_csum_start,
    bad_csum_offset,
    unsupported_gso_type,
    no_payload,
    segment_too_large,      // one segment does not fit an output slot
    too_many_segments,      // more segments than the output batch has slots
    batch_full,             // fits an empty batch: flush and retry
    no_headroom,            // batch headroom too small for a virtio_net_hdr
};
const char* describe(OffloadError error);

struct SplitOutcome {
    OffloadError error = OffloadError::none;
    std::size_t packets = 0;  // appended to the output batch
};

// Appends the packets carried by `packet` (an IP packet after its virtio
// header) to `out`. GSO_NONE packets are copied, completing a NEEDS_CSUM
// checksum. On any error nothing is appended.
SplitOutcome split_super_packet(const VirtioNetHdr& hdr, std::span<const std::uint8_t> packet, PacketBatch& out);

// Coalesces inner packets for tun writes ("GRO"). A merged packet is written
// as an iovec list: the head packet (virtio hdr prepended in its front room,
// IP/transport headers rewritten for the whole) and then each merged packet's
// payload, in place. The batch must stay untouched until the writes are done.
class GroCoalescer {
public:
    explicit GroCoalescer(std::size_t max_packets);
    ~GroCoalescer();
    GroCoalescer(GroCoalescer&&) noexcept;
    GroCoalescer& operator=(GroCoalescer&&) noexcept;

    struct Outcome {
        OffloadError error = OffloadError::none;
        std::span<const iovec> pieces;              // every write's pieces, write after write
        std::span<const std::uint16_t> write_ends;  // write k = pieces[write_ends[k-1] .. write_ends[k])
        std::size_t merged = 0;                     // packets folded into another
        std::size_t writes() const { return write_ends.size(); }
        std::span<const iovec> write(std::size_t k) const {
            const std::size_t begin = k == 0 ? 0 : write_ends[k - 1];
            return pieces.subspan(begin, write_ends[k] - begin);
        }
    };
    // tcp/udp say which kinds the tun accepts as GSO (TSO / USO offloads).
    Outcome coalesce(PacketBatch& batch, bool tcp, bool udp);

private:
    struct Item;
    std::size_t max_packets_;
    std::unique_ptr<Item[]> items_;
    std::unique_ptr<std::uint16_t[]> next_;        // per packet: the next packet merged into the same item
    std::unique_ptr<iovec[]> pieces_;              // one per packet at most
    std::unique_ptr<std::uint16_t[]> write_ends_;
};

}  // namespace espvpn::io
