#include "protocols/anyconnect/dtls_framing.h"

#include <cstring>

namespace espvpn::anyconnect {

const char* describe(DtlsRecordDrop drop) {
    switch (drop) {
        case DtlsRecordDrop::none: return "none";
        case DtlsRecordDrop::empty: return "empty record";
        case DtlsRecordDrop::not_ip: return "data packet is neither IPv4 nor IPv6";
        case DtlsRecordDrop::compressed: return "compressed data (compression was not negotiated)";
        case DtlsRecordDrop::unknown_type: return "unknown packet type";
    }
    return "?";
}

DtlsRecord parse_dtls_record(std::span<const std::uint8_t> record) {
    DtlsRecord r;
    if (record.empty()) {
        r.drop = DtlsRecordDrop::empty;
        return r;
    }
    r.payload = record.subspan(kDtlsPacketHeaderSize);
    switch (static_cast<DtlsPacketType>(record[0])) {
        case DtlsPacketType::data: {
            const unsigned version = r.payload.empty() ? 0 : r.payload[0] >> 4;
            if (version == 4 || version == 6) {
                r.kind = DtlsRecordKind::data;
            } else {
                r.drop = DtlsRecordDrop::not_ip;
            }
            return r;
        }
        case DtlsPacketType::dpd_request: r.kind = DtlsRecordKind::dpd_request; return r;
        case DtlsPacketType::dpd_response: r.kind = DtlsRecordKind::dpd_response; return r;
        case DtlsPacketType::keepalive: r.kind = DtlsRecordKind::keepalive; return r;
        case DtlsPacketType::disconnect:
        case DtlsPacketType::terminate: r.kind = DtlsRecordKind::disconnect; return r;
        case DtlsPacketType::compressed: r.drop = DtlsRecordDrop::compressed; return r;
    }
    r.drop = DtlsRecordDrop::unknown_type;
    return r;
}

std::size_t write_dtls_packet(DtlsPacketType type, std::span<const std::uint8_t> payload,
                              std::span<std::uint8_t> out) {
    const std::size_t total = kDtlsPacketHeaderSize + payload.size();
    if (out.size() < total) return 0;
    if (!payload.empty()) std::memmove(out.data() + kDtlsPacketHeaderSize, payload.data(), payload.size());
    out[0] = static_cast<std::uint8_t>(type);
    return total;
}

}  // namespace espvpn::anyconnect
