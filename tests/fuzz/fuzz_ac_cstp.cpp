// libFuzzer target: the AnyConnect CSTP byte stream (CstpDecoder), cut into
// pieces of a size the first byte picks, so packets split across TLS reads. A
// packet must stay within the decoder's limit and its header's type; a failed
// decoder must stay failed.
#include "protocols/anyconnect/cstp.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::InputReader in(data, size);
    const std::size_t step = in.byte() + 1;
    constexpr std::size_t kMax = 2048;  // small, so the fuzzer reaches the limit
    anyconnect::CstpDecoder decoder(kMax);
    auto rest = in.rest();
    while (!rest.empty()) {
        std::span<const std::uint8_t> piece = rest.first(std::min(step, rest.size()));
        rest = rest.subspan(piece.size());
        for (;;) {
            auto packet = decoder.next(piece);
            if (!packet) {
                if (!decoder.failed()) __builtin_trap();
                return 0;
            }
            if (!*packet) break;
            if ((*packet)->payload.size() > kMax) __builtin_trap();
            (void)anyconnect::describe((*packet)->type);
        }
        if (!piece.empty()) __builtin_trap();  // nullopt means every byte was taken
    }
    return 0;
}
