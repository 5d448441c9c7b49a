// libFuzzer target: AnyConnect's data framing from the server: the CSTP byte
// stream (8-byte STF headers) cut into reads of a size the first byte picks,
// and each decrypted DTLS record's one-byte type framing. A decoded packet must
// fit its header's limit; a DPD request must be answerable in place.
#include <array>

#include "protocols/anyconnect/cstp.h"
#include "protocols/anyconnect/dtls_framing.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::InputReader in(data, size);
    const std::size_t step = in.byte() + 1;
    auto rest = in.rest();

    // The same bytes as one DTLS record each piece: classify, answer DPD in place.
    static std::array<std::uint8_t, 2048> out;
    for (auto r = rest; !r.empty(); r = r.subspan(std::min(step, r.size()))) {
        auto record = anyconnect::parse_dtls_record(r.first(std::min(step, r.size())));
        if (record.payload.size() > r.size()) __builtin_trap();
        if (record.kind == anyconnect::DtlsRecordKind::dpd_request)
            (void)anyconnect::write_dtls_packet(anyconnect::DtlsPacketType::dpd_response, record.payload, out);
    }

    anyconnect::CstpDecoder decoder(2048);
    while (!rest.empty() && !decoder.failed()) {
        std::span<const std::uint8_t> piece = rest.first(std::min(step, rest.size()));
        rest = rest.subspan(piece.size());
        for (;;) {
            auto packet = decoder.next(piece);
            if (!packet || !*packet) break;
            if ((*packet)->payload.size() > 2048) __builtin_trap();
            (void)anyconnect::describe((*packet)->type);
        }
    }
    return 0;
}
