#include "protocols/anyconnect/cstp.h"

#include <cstdio>
#include <cstring>

#include "protocols/base/byte_order.h"

namespace espvpn::anyconnect {

namespace {
constexpr std::uint8_t kMagic[4] = {'S', 'T', 'F', 0x01};
}

const char* describe(CstpType type) {
    switch (type) {
        case CstpType::data: return "DATA";
        case CstpType::dpd_request: return "DPD-REQ";
        case CstpType::dpd_response: return "DPD-RESP";
        case CstpType::disconnect: return "DISCONNECT";
        case CstpType::keepalive: return "KEEPALIVE";
        case CstpType::compressed_data: return "COMPRESSED";
        case CstpType::terminate: return "TERMINATE";
    }
    return "unknown";
}

void write_cstp_header(CstpType type, std::uint16_t payload_len, std::uint8_t* out) {
    std::memcpy(out, kMagic, 4);
    store_be16(out + 4, payload_len);
    out[6] = static_cast<std::uint8_t>(type);
    out[7] = 0;
}

CstpHeader cstp_header(CstpType type, std::uint16_t payload_len) {
    CstpHeader h;
    write_cstp_header(type, payload_len, h.data());
    return h;
}

std::vector<std::uint8_t> cstp_logout_packet(std::string_view reason) {
    reason = reason.substr(0, 255);
    std::vector<std::uint8_t> out(kCstpHeaderSize + 1 + reason.size());
    write_cstp_header(CstpType::disconnect, static_cast<std::uint16_t>(1 + reason.size()), out.data());
    out[kCstpHeaderSize] = kDisconnectLogout;
    std::memcpy(out.data() + kCstpHeaderSize + 1, reason.data(), reason.size());
    return out;
}

CstpDecoder::CstpDecoder(std::size_t max_payload)
    : splitter_(kCstpHeaderSize, std::min<std::size_t>(max_payload, 0xFFFF)),
      max_payload_(std::min<std::size_t>(max_payload, 0xFFFF)) {}

auto CstpDecoder::check_header(std::span<const std::uint8_t> header) const -> Result<HeaderInfo> {
    const std::uint8_t* h = header.data();
    if (std::memcmp(h, kMagic, 4) != 0) {
        char hex[32];
        std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", h[0], h[1], h[2], h[3]);
        return make_error(std::string("bad packet magic ") + hex + " (expected 53 54 46 01)");
    }
    if (h[7] != 0) return make_error("packet header byte 7 is " + std::to_string(h[7]) + ", expected 0");
    const std::size_t len = load_be16(h + 4);
    if (len > max_payload_)
        return make_error("packet payload of " + std::to_string(len) + " bytes exceeds the limit of " +
                          std::to_string(max_payload_));
    switch (static_cast<CstpType>(h[6])) {
        case CstpType::data:
        case CstpType::dpd_request:
        case CstpType::dpd_response:
        case CstpType::disconnect:
        case CstpType::keepalive:
        case CstpType::terminate: return HeaderInfo{static_cast<CstpType>(h[6]), len};
        case CstpType::compressed_data: return make_error("compressed packet, but compression was not negotiated");
    }
    return make_error("packet of unknown type " + std::to_string(h[6]));
}

Result<std::optional<CstpPacket>> CstpDecoder::fail(std::string message) {
    failed_ = true;
    return make_error("CSTP: " + std::move(message));
}

Result<std::optional<CstpPacket>> CstpDecoder::next(std::span<const std::uint8_t>& input) {
    if (failed_) return make_error("CSTP: decoder stopped after an earlier bad packet");
    auto packet = splitter_.next(input, [this](std::span<const std::uint8_t> h) { return check_header(h); });
    if (!packet) return fail(packet.error().message);
    if (!*packet) return std::optional<CstpPacket>{};
    return std::optional<CstpPacket>(CstpPacket{(*packet)->info.type, (*packet)->payload});
}

}  // namespace espvpn::anyconnect
