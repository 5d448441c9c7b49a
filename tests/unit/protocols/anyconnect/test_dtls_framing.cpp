#include <doctest/doctest.h>

#include <array>
#include <string>
#include <vector>

#include "protocols/anyconnect/dtls_framing.h"

using namespace espvpn::anyconnect;

namespace {
std::vector<std::uint8_t> bytes(std::initializer_list<int> list) {
    std::vector<std::uint8_t> v;
    for (int b : list) v.push_back(static_cast<std::uint8_t>(b));
    return v;
}
}  // namespace

TEST_CASE("DTLS records are classified by their type byte") {
    const auto ipv4 = bytes({0x00, 0x45, 0, 0, 20});
    DtlsRecord r = parse_dtls_record(ipv4);
    CHECK(r.kind == DtlsRecordKind::data);
    CHECK(r.payload.size() == 4);
    CHECK(r.payload[0] == 0x45);
    CHECK(r.payload.data() == ipv4.data() + 1);

    CHECK(parse_dtls_record(bytes({0x00, 0x60, 0, 0})).kind == DtlsRecordKind::data);
    const auto dpd = bytes({0x03, 1, 2, 3});
    r = parse_dtls_record(dpd);
    CHECK(r.kind == DtlsRecordKind::dpd_request);
    CHECK(r.payload.size() == 3);
    CHECK(parse_dtls_record(bytes({0x03})).kind == DtlsRecordKind::dpd_request);  // OC's 1-byte DPD
    CHECK(parse_dtls_record(bytes({0x04})).kind == DtlsRecordKind::dpd_response);
    CHECK(parse_dtls_record(bytes({0x07})).kind == DtlsRecordKind::keepalive);
    CHECK(parse_dtls_record(bytes({0x05, 0xb0, 'x'})).kind == DtlsRecordKind::disconnect);
    CHECK(parse_dtls_record(bytes({0x09})).kind == DtlsRecordKind::disconnect);
}

TEST_CASE("DTLS records that cannot be delivered are dropped with a reason") {
    CHECK(parse_dtls_record({}).drop == DtlsRecordDrop::empty);
    CHECK(parse_dtls_record(bytes({0x00})).drop == DtlsRecordDrop::not_ip);        // data without a packet
    CHECK(parse_dtls_record(bytes({0x00, 0x10, 1})).drop == DtlsRecordDrop::not_ip);
    CHECK(parse_dtls_record(bytes({0x08, 0x45})).drop == DtlsRecordDrop::compressed);
    for (int t : {0x01, 0x02, 0x06, 0x0a, 0x53, 0xff}) {
        const DtlsRecord r = parse_dtls_record(bytes({t, 0x45}));
        CHECK(r.kind == DtlsRecordKind::dropped);
        CHECK(r.drop == DtlsRecordDrop::unknown_type);
    }
    CHECK(std::string(describe(DtlsRecordDrop::compressed)).find("compress") != std::string::npos);
}

TEST_CASE("write_dtls_packet puts the type in front, also in place for a DPD answer") {
    std::array<std::uint8_t, 8> out{};
    const auto payload = bytes({9, 8, 7});
    CHECK(write_dtls_packet(DtlsPacketType::keepalive, {}, out) == 1);
    CHECK(out[0] == 0x07);
    CHECK(write_dtls_packet(DtlsPacketType::data, payload, out) == 4);
    CHECK(out[0] == 0x00);
    CHECK(out[1] == 9);
    CHECK(out[3] == 7);
    CHECK(write_dtls_packet(DtlsPacketType::data, payload, std::span<std::uint8_t>(out).first(3)) == 0);

    // A received DPD request answered in its own buffer: only the type changes.
    auto request = bytes({0x03, 'p', 'i', 'n', 'g'});
    const DtlsRecord r = parse_dtls_record(request);
    REQUIRE(r.kind == DtlsRecordKind::dpd_request);
    CHECK(write_dtls_packet(DtlsPacketType::dpd_response, r.payload, request) == 5);
    CHECK(request == bytes({0x04, 'p', 'i', 'n', 'g'}));
}
