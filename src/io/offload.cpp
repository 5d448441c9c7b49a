#include "src/io/offload.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "protocols/base/byte_order.h"
#include "src/io/checksum.h"

namespace espvpn::io {

namespace {

constexpr std::uint8_t kProtoTcp = 6;
constexpr std::uint8_t kProtoUdp = 17;
constexpr std::size_t kIpv4HeaderLen = 20;
constexpr std::size_t kIpv6HeaderLen = 40;
constexpr std::size_t kUdpHeaderLen = 8;
// SYN, RST, URG, ECE and CWR segments are never merged (only ACK|PSH are).
constexpr std::uint8_t kTcpFin = 0x01, kTcpPsh = 0x08, kTcpAck = 0x10, kTcpCwr = 0x80;
constexpr std::size_t kTcpCsumOffset = 16;
constexpr std::size_t kUdpCsumOffset = 6;
constexpr std::size_t kMaxIpPacket = 65535;
constexpr std::uint16_t kNoPacket = 0xffff;

// The IP and transport headers of a packet; l4_len is 0 for non-TCP/UDP.
struct Headers {
    std::uint8_t version = 0;
    std::uint8_t protocol = 0;
    std::size_t ip_len = 0;
    std::size_t l4_len = 0;
    std::size_t total() const { return ip_len + l4_len; }
};

// Parses IP (no IPv4 options, no IPv6 extension headers) and TCP/UDP headers.
OffloadError parse_headers(std::span<const std::uint8_t> pkt, Headers& h) {
    if (pkt.empty()) return OffloadError::truncated;
    h.version = pkt[0] >> 4;
    if (h.version == 4) {
        if (pkt.size() < kIpv4HeaderLen) return OffloadError::truncated;
        if ((pkt[0] & 0x0f) != 5) return OffloadError::ipv4_options;
        if ((load_be16(&pkt[6]) & 0x3fff) != 0) return OffloadError::ipv4_fragment;  // MF or offset
        h.ip_len = kIpv4HeaderLen;
        h.protocol = pkt[9];
    } else if (h.version == 6) {
        if (pkt.size() < kIpv6HeaderLen) return OffloadError::truncated;
        h.ip_len = kIpv6HeaderLen;
        h.protocol = pkt[6];
    } else {
        return OffloadError::bad_ip_version;
    }
    if (h.protocol == kProtoTcp) {
        if (pkt.size() < h.ip_len + 20) return OffloadError::truncated;
        std::size_t doff = (pkt[h.ip_len + 12] >> 4) * 4u;
        if (doff < 20 || h.ip_len + doff > pkt.size()) return OffloadError::bad_tcp_header;
        h.l4_len = doff;
    } else if (h.protocol == kProtoUdp) {
        if (pkt.size() < h.ip_len + kUdpHeaderLen) return OffloadError::truncated;
        h.l4_len = kUdpHeaderLen;
    } else if (h.version == 6) {
        return OffloadError::ipv6_extension_headers;
    } else {
        return OffloadError::bad_l4_protocol;
    }
    return OffloadError::none;
}

std::uint64_t pseudo_sum(const std::uint8_t* ip, const Headers& h, std::size_t l4_length) {
    if (h.version == 4)
        return checksum::pseudo_header({ip + 12, 4}, {ip + 16, 4}, h.protocol, static_cast<std::uint32_t>(l4_length));
    return checksum::pseudo_header({ip + 8, 16}, {ip + 24, 16}, h.protocol, static_cast<std::uint32_t>(l4_length));
}

void set_ipv4_checksum(std::uint8_t* ip) {
    ip[10] = ip[11] = 0;
    checksum::store(ip + 10, static_cast<std::uint16_t>(~checksum::fold(checksum::add(0, {ip, kIpv4HeaderLen}))));
}

// Writes the full TCP/UDP checksum of a complete packet of `length` bytes whose
// payload (after the transport header) sums to payload_sum.
void set_l4_checksum(std::uint8_t* pkt, const Headers& h, std::size_t length, std::uint64_t payload_sum) {
    std::size_t l4_length = length - h.ip_len;
    std::uint8_t* l4 = pkt + h.ip_len;
    std::size_t at = h.protocol == kProtoTcp ? kTcpCsumOffset : kUdpCsumOffset;
    l4[at] = l4[at + 1] = 0;
    const std::uint64_t header_sum = checksum::add(pseudo_sum(pkt, h, l4_length), {l4, h.l4_len});
    std::uint64_t all = header_sum + payload_sum;
    all += (all < payload_sum);
    std::uint16_t sum = static_cast<std::uint16_t>(~checksum::fold(all));
    if (sum == 0 && h.protocol == kProtoUdp) sum = 0xffff;  // 0 means "no checksum" in UDP
    checksum::store(l4 + at, sum);
}

bool l4_checksum_valid(const std::uint8_t* pkt, const Headers& h, std::size_t length) {
    std::size_t l4_length = length - h.ip_len;
    return checksum::fold(checksum::add(pseudo_sum(pkt, h, l4_length), {pkt + h.ip_len, l4_length})) == 0xffff;
}

void set_ip_length(std::uint8_t* pkt, const Headers& h, std::size_t length) {
    if (h.version == 4) {
        store_be16(pkt + 2, static_cast<std::uint32_t>(length));
        set_ipv4_checksum(pkt);
    } else {
        store_be16(pkt + 4, static_cast<std::uint32_t>(length - kIpv6HeaderLen));
    }
}

SplitOutcome copy_with_checksum(const VirtioNetHdr& hdr, std::span<const std::uint8_t> packet, PacketBatch& out) {
    if (packet.empty()) return {OffloadError::truncated, 0};
    if (packet.size() > out.capacity()) return {OffloadError::segment_too_large, 0};
    if (hdr.flags & VirtioNetHdr::kFlagNeedsCsum) {
        if (hdr.csum_start >= packet.size()) return {OffloadError::bad_csum_start, 0};
        if (std::size_t{hdr.csum_start} + hdr.csum_offset + 2 > packet.size()) return {OffloadError::bad_csum_offset, 0};
    }
    if (out.full()) return {OffloadError::batch_full, 0};
    std::uint8_t* dst = out.next_room().data();
    if (hdr.flags & VirtioNetHdr::kFlagNeedsCsum) {
        // The field holds the pseudo-header sum; complete it over the rest, summed as it is copied.
        std::memcpy(dst, packet.data(), hdr.csum_start);
        const std::uint64_t rest = checksum::copy_and_add(dst + hdr.csum_start, packet.data() + hdr.csum_start,
                                                          packet.size() - hdr.csum_start, 0);
        checksum::store(dst + hdr.csum_start + hdr.csum_offset, static_cast<std::uint16_t>(~checksum::fold(rest)));
    } else {
        std::memcpy(dst, packet.data(), packet.size());
    }
    out.commit(packet.size());
    return {OffloadError::none, 1};
}

}  // namespace

const char* describe(OffloadError error) {
    switch (error) {
        case OffloadError::none: return "ok";
        case OffloadError::truncated: return "packet shorter than its headers";
        case OffloadError::bad_ip_version: return "IP version is neither 4 nor 6";
        case OffloadError::ipv4_options: return "IPv4 header with options (IHL != 5)";
        case OffloadError::ipv4_fragment: return "IPv4 fragment";
        case OffloadError::ipv6_extension_headers: return "IPv6 next header is neither TCP nor UDP";
        case OffloadError::bad_l4_protocol: return "transport protocol does not match the GSO type";
        case OffloadError::bad_tcp_header: return "TCP data offset below 5 or beyond the packet";
        case OffloadError::hdr_len_beyond_packet: return "virtio hdr_len beyond the packet";
        case OffloadError::gso_size_zero: return "virtio gso_size is 0 for a GSO packet";
        case OffloadError::gso_without_csum: return "GSO packet without NEEDS_CSUM";
        case OffloadError::bad_csum_start: return "virtio csum_start does not point at the transport header";
        case OffloadError::bad_csum_offset: return "virtio csum_offset wrong for the protocol or beyond the packet";
        case OffloadError::unsupported_gso_type: return "unsupported virtio gso_type";
        case OffloadError::no_payload: return "GSO packet without payload";
        case OffloadError::segment_too_large: return "segment larger than an output slot";
        case OffloadError::too_many_segments: return "more segments than the output batch holds";
        case OffloadError::batch_full: return "output batch full";
        case OffloadError::no_headroom: return "batch headroom smaller than a virtio_net_hdr";
    }
    return "unknown offload error";
}

bool parse_virtio_net_hdr(std::span<const std::uint8_t> bytes, VirtioNetHdr& out) {
    if (bytes.size() < kVirtioNetHdrSize) return false;
    out.flags = bytes[0];
    out.gso_type = bytes[1];
    std::memcpy(&out.hdr_len, &bytes[2], 2);
    std::memcpy(&out.gso_size, &bytes[4], 2);
    std::memcpy(&out.csum_start, &bytes[6], 2);
    std::memcpy(&out.csum_offset, &bytes[8], 2);
    return true;
}

void write_virtio_net_hdr(const VirtioNetHdr& hdr, std::uint8_t* out) {
    out[0] = hdr.flags;
    out[1] = hdr.gso_type;
    std::memcpy(out + 2, &hdr.hdr_len, 2);
    std::memcpy(out + 4, &hdr.gso_size, 2);
    std::memcpy(out + 6, &hdr.csum_start, 2);
    std::memcpy(out + 8, &hdr.csum_offset, 2);
}

SplitOutcome split_super_packet(const VirtioNetHdr& hdr, std::span<const std::uint8_t> packet, PacketBatch& out) {
    const std::uint8_t gso = hdr.gso_type & static_cast<std::uint8_t>(~VirtioNetHdr::kGsoEcn);
    if (gso == VirtioNetHdr::kGsoNone) return copy_with_checksum(hdr, packet, out);
    if (gso != VirtioNetHdr::kGsoTcpV4 && gso != VirtioNetHdr::kGsoTcpV6 && gso != VirtioNetHdr::kGsoUdpL4)
        return {OffloadError::unsupported_gso_type, 0};
    if (hdr.gso_size == 0) return {OffloadError::gso_size_zero, 0};
    if (hdr.hdr_len > packet.size()) return {OffloadError::hdr_len_beyond_packet, 0};
    if (!(hdr.flags & VirtioNetHdr::kFlagNeedsCsum)) return {OffloadError::gso_without_csum, 0};

    Headers h;
    if (OffloadError e = parse_headers(packet, h); e != OffloadError::none) return {e, 0};
    const bool tcp = gso != VirtioNetHdr::kGsoUdpL4;
    if ((tcp && h.protocol != kProtoTcp) || (!tcp && h.protocol != kProtoUdp) ||
        (gso == VirtioNetHdr::kGsoTcpV4 && h.version != 4) || (gso == VirtioNetHdr::kGsoTcpV6 && h.version != 6))
        return {OffloadError::bad_l4_protocol, 0};
    if (hdr.csum_start != h.ip_len) return {OffloadError::bad_csum_start, 0};
    if (hdr.csum_offset != (tcp ? kTcpCsumOffset : kUdpCsumOffset)) return {OffloadError::bad_csum_offset, 0};
    // hdr_len from the kernel can cover payload too (forwarded skbs): trust the
    // parsed header lengths instead.
    const std::size_t hlen = h.total();
    if (packet.size() <= hlen) return {OffloadError::no_payload, 0};
    const std::size_t payload = packet.size() - hlen;
    const std::size_t segments = (payload + hdr.gso_size - 1) / hdr.gso_size;
    if (hlen + std::min<std::size_t>(hdr.gso_size, payload) > out.capacity()) return {OffloadError::segment_too_large, 0};
    if (segments > out.slots()) return {OffloadError::too_many_segments, 0};
    if (segments > out.free_slots()) return {OffloadError::batch_full, 0};

    const std::uint8_t* src = packet.data();
    const std::uint16_t ip_id = h.version == 4 ? load_be16(src + 4) : 0;
    const std::uint32_t seq = tcp ? load_be32(src + h.ip_len + 4) : 0;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < segments; ++i) {
        const std::size_t seg = std::min<std::size_t>(hdr.gso_size, payload - offset);
        std::uint8_t* dst = out.next_room().data();
        std::memcpy(dst, src, hlen);
        const std::uint64_t payload_sum = checksum::copy_and_add(dst + hlen, src + hlen + offset, seg, 0);
        if (h.version == 4) store_be16(dst + 4, static_cast<std::uint16_t>(ip_id + i));
        set_ip_length(dst, h, hlen + seg);
        std::uint8_t* l4 = dst + h.ip_len;
        if (tcp) {
            store_be32(l4 + 4, seq + static_cast<std::uint32_t>(offset));
            if (i + 1 < segments) l4[13] &= static_cast<std::uint8_t>(~(kTcpFin | kTcpPsh));
            if (i > 0) l4[13] &= static_cast<std::uint8_t>(~kTcpCwr);
        } else {
            store_be16(l4 + 4, static_cast<std::uint32_t>(kUdpHeaderLen + seg));
        }
        set_l4_checksum(dst, h, hlen + seg, payload_sum);
        out.commit(hlen + seg);
        offset += seg;
    }
    return {OffloadError::none, segments};
}

// ---------------------------------------------------------------------------
// GRO

struct GroCoalescer::Item {
    std::uint16_t slot;       // the head packet
    std::uint16_t last;       // the packet merged last (the head while alone)
    std::uint32_t length;     // IP length of the whole: head + merged payloads
    Headers h;
    std::uint16_t gso_size;   // payload of the first segment
    std::uint16_t segments;
    std::uint32_t next_seq;   // TCP: sequence number the next segment must carry
    bool open;                // more segments may be appended
};

GroCoalescer::GroCoalescer(std::size_t max_packets)
    : max_packets_(max_packets),
      items_(new Item[max_packets]),
      next_(new std::uint16_t[max_packets]),
      pieces_(new iovec[max_packets]),
      write_ends_(new std::uint16_t[max_packets]) {
    if (max_packets >= kNoPacket) throw std::invalid_argument("GroCoalescer: too many packets per batch");
}
GroCoalescer::~GroCoalescer() = default;
GroCoalescer::GroCoalescer(GroCoalescer&&) noexcept = default;
GroCoalescer& GroCoalescer::operator=(GroCoalescer&&) noexcept = default;

namespace {

// Same flow and same per-packet header values that a merged packet keeps once.
bool same_flow(const std::uint8_t* a, const std::uint8_t* b, const Headers& h) {
    if (h.version == 4) {
        if (a[1] != b[1] || a[8] != b[8] || ((a[6] ^ b[6]) & 0x40)) return false;  // TOS, TTL, DF
        if (std::memcmp(a + 12, b + 12, 8) != 0) return false;
    } else {
        if (std::memcmp(a, b, 4) != 0 || a[7] != b[7]) return false;  // class, flow label, hop limit
        if (std::memcmp(a + 8, b + 8, 32) != 0) return false;
    }
    return std::memcmp(a + h.ip_len, b + h.ip_len, 4) == 0;  // ports
}

// Transport headers agree except for what segmentation changes.
bool same_transport(const std::uint8_t* a, const std::uint8_t* b, const Headers& h) {
    if (h.protocol != kProtoTcp) return true;
    const std::uint8_t* ta = a + h.ip_len;
    const std::uint8_t* tb = b + h.ip_len;
    // Like the kernel's GRO: ack, data offset, window and options all equal
    // (a window update must reach the stack, not vanish into a merge).
    return std::memcmp(ta + 8, tb + 8, 4) == 0                 // ack number
           && ta[12] == tb[12]                                 // data offset
           && std::memcmp(ta + 14, tb + 14, 2) == 0            // window
           && std::memcmp(ta + 20, tb + 20, h.l4_len - 20) == 0;  // options
}

}  // namespace

GroCoalescer::Outcome GroCoalescer::coalesce(PacketBatch& batch, bool tcp, bool udp) {
    Outcome outcome;
    if (batch.headroom() < kVirtioNetHdrSize) {
        outcome.error = OffloadError::no_headroom;
        return outcome;
    }
    if (batch.size() > max_packets_) {
        outcome.error = OffloadError::too_many_segments;
        return outcome;
    }
    const std::size_t n = batch.size();
    std::size_t items = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::span<std::uint8_t> pkt = batch.packet(i);
        Headers h;
        const bool parsed = parse_headers(pkt, h) == OffloadError::none;
        bool candidate = parsed;
        std::size_t payload = candidate ? pkt.size() - std::min(pkt.size(), h.total()) : 0;
        if (candidate) {
            // Lengths must match the buffer exactly: merged packets rewrite them.
            std::size_t ip_total = h.version == 4 ? load_be16(&pkt[2]) : load_be16(&pkt[4]) + kIpv6HeaderLen;
            candidate = ip_total == pkt.size() && payload > 0;
        }
        if (candidate && h.protocol == kProtoTcp) {
            std::uint8_t flags = pkt[h.ip_len + 13];
            candidate = tcp && (flags & ~(kTcpAck | kTcpPsh)) == 0 && (flags & kTcpAck);
        } else if (candidate) {
            candidate = udp && load_be16(&pkt[h.ip_len + 4]) == pkt.size() - h.ip_len &&
                        load_be16(&pkt[h.ip_len + 6]) != 0;
        }
        // Merged segments are trusted by the kernel (NEEDS_CSUM), so only
        // packets whose own checksum is right may be merged.
        if (candidate) candidate = l4_checksum_valid(pkt.data(), h, pkt.size());

        // The newest item of the same flow, if any.
        Item* flow = nullptr;
        if (parsed) {
            for (std::size_t k = items; k-- > 0;) {
                Item& it = items_[k];
                if (it.h.version == h.version && it.h.protocol == h.protocol &&
                    same_flow(batch.packet(it.slot).data(), pkt.data(), h)) {
                    flow = &it;
                    break;
                }
            }
        }
        if (flow && candidate && flow->open) {
            std::span<std::uint8_t> head = batch.packet(flow->slot);
            bool fits = flow->h.l4_len == h.l4_len && same_transport(head.data(), pkt.data(), h) &&
                        payload <= flow->gso_size && flow->length + payload <= kMaxIpPacket;
            if (fits && h.protocol == kProtoTcp) fits = load_be32(&pkt[h.ip_len + 4]) == flow->next_seq;
            if (fits) {
                next_[flow->last] = static_cast<std::uint16_t>(i);
                flow->last = static_cast<std::uint16_t>(i);
                flow->length += static_cast<std::uint32_t>(payload);
                ++flow->segments;
                ++outcome.merged;
                if (h.protocol == kProtoTcp) {
                    flow->next_seq += static_cast<std::uint32_t>(payload);
                    std::uint8_t psh = pkt[h.ip_len + 13] & kTcpPsh;
                    head[h.ip_len + 13] |= psh;
                    if (psh) flow->open = false;
                }
                if (payload < flow->gso_size) flow->open = false;
                continue;
            }
        }
        if (flow) flow->open = false;  // keep the flow in order: nothing later joins the older item
        Item& it = items_[items++];
        it.slot = static_cast<std::uint16_t>(i);
        it.last = it.slot;
        it.length = static_cast<std::uint32_t>(pkt.size());
        it.h = h;
        it.segments = 1;
        it.gso_size = static_cast<std::uint16_t>(payload);
        it.open = candidate && !(h.protocol == kProtoTcp && (pkt[h.ip_len + 13] & kTcpPsh));
        it.next_seq = candidate && h.protocol == kProtoTcp
                          ? load_be32(&pkt[h.ip_len + 4]) + static_cast<std::uint32_t>(payload)
                          : 0;
    }
    // Items are in arrival order of their first packet: write them that way.
    std::size_t pieces = 0;
    for (std::size_t k = 0; k < items; ++k) {
        Item& it = items_[k];
        next_[it.last] = kNoPacket;
        VirtioNetHdr vh;
        if (it.segments > 1) {
            std::uint8_t* pkt = batch.packet(it.slot).data();
            set_ip_length(pkt, it.h, it.length);
            const bool is_tcp = it.h.protocol == kProtoTcp;
            std::uint8_t* l4 = pkt + it.h.ip_len;
            std::size_t l4_length = it.length - it.h.ip_len;
            if (!is_tcp) store_be16(l4 + 4, static_cast<std::uint32_t>(l4_length));
            std::size_t at = is_tcp ? kTcpCsumOffset : kUdpCsumOffset;
            // The kernel completes the checksum from the pseudo-header sum.
            checksum::store(l4 + at, checksum::fold(pseudo_sum(pkt, it.h, l4_length)));
            vh.flags = VirtioNetHdr::kFlagNeedsCsum;
            vh.gso_type = is_tcp ? (it.h.version == 4 ? VirtioNetHdr::kGsoTcpV4 : VirtioNetHdr::kGsoTcpV6)
                                 : VirtioNetHdr::kGsoUdpL4;
            vh.hdr_len = static_cast<std::uint16_t>(it.h.total());
            vh.gso_size = it.gso_size;
            vh.csum_start = static_cast<std::uint16_t>(it.h.ip_len);
            vh.csum_offset = static_cast<std::uint16_t>(at);
        }
        if (!batch.grow_front(it.slot, kVirtioNetHdrSize)) {
            outcome.error = OffloadError::no_headroom;
            return outcome;
        }
        std::span<std::uint8_t> head = batch.packet(it.slot);
        write_virtio_net_hdr(vh, head.data());
        pieces_[pieces++] = {head.data(), head.size()};
        for (std::uint16_t j = next_[it.slot]; j != kNoPacket; j = next_[j]) {
            std::span<std::uint8_t> merged = batch.packet(j).subspan(it.h.total());
            pieces_[pieces++] = {merged.data(), merged.size()};
        }
        write_ends_[k] = static_cast<std::uint16_t>(pieces);
    }
    outcome.pieces = {pieces_.get(), pieces};
    outcome.write_ends = {write_ends_.get(), items};
    return outcome;
}

}  // namespace espvpn::io
