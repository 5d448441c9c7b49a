// libFuzzer target: the AnyConnect DTLS record format (1-byte type + payload):
// parse_dtls_record on the input, then a DPD answer written in place as the
// receive pipeline does, which must parse back to the same payload.
#include <cstring>
#include <vector>

#include "protocols/anyconnect/dtls_framing.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const anyconnect::DtlsRecord r = anyconnect::parse_dtls_record({data, size});
    if (!r.payload.empty() && (r.payload.data() < data || r.payload.data() + r.payload.size() > data + size))
        __builtin_trap();
    if (r.kind == anyconnect::DtlsRecordKind::dropped) {
        (void)anyconnect::describe(r.drop);
        return 0;
    }
    // Echo the payload as a DPD response, in place (the payload aliases out + 1).
    std::vector<std::uint8_t> buf(data, data + size);
    const std::size_t offset = r.payload.empty() ? 1 : static_cast<std::size_t>(r.payload.data() - data);
    std::vector<std::uint8_t> payload(r.payload.begin(), r.payload.end());
    const std::size_t n = anyconnect::write_dtls_packet(
        anyconnect::DtlsPacketType::dpd_response,
        std::span<const std::uint8_t>(buf.data() + std::min(offset, buf.size()), payload.size()), buf);
    if (n == 0) return 0;
    const anyconnect::DtlsRecord back = anyconnect::parse_dtls_record({buf.data(), n});
    if (back.kind != anyconnect::DtlsRecordKind::dpd_response || back.payload.size() != payload.size() ||
        (!payload.empty() && std::memcmp(back.payload.data(), payload.data(), payload.size()) != 0))
        __builtin_trap();
    (void)anyconnect::dtls_link_mtu(size, size & 1);
    return 0;
}
