// libFuzzer target: the GP HTTPS-tunnel byte stream: the 12-byte reply check,
// then GpFrameDecoder over the rest, cut into pieces of a size the first byte
// picks (frames split across reads). A decoded frame must fit its header.
#include "protocols/gp/https_tunnel.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::InputReader in(data, size);
    const std::size_t step = in.byte() + 1;
    gp::GpTunnelRefusal refusal;
    (void)gp::check_tunnel_reply(in.take(gp::kTunnelReplySize), &refusal);

    gp::GpFrameDecoder decoder(2048);
    auto rest = in.rest();
    while (!rest.empty() && !decoder.failed()) {
        std::span<const std::uint8_t> piece = rest.first(std::min(step, rest.size()));
        rest = rest.subspan(piece.size());
        for (;;) {
            auto frame = decoder.next(piece);
            if (!frame || !*frame) break;
            if ((*frame)->payload.size() > 2048) __builtin_trap();
            if (!(*frame)->payload.empty()) (void)gp::frame_header_for_packet((*frame)->payload);
        }
    }
    return 0;
}
