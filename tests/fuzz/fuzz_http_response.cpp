// libFuzzer target: the incremental HTTP/1.1 response parser (status line,
// headers, Content-Length / chunked / close-delimited bodies, trailers, 1xx).
// The first input byte picks the request method and how the rest is cut into
// feed() calls, so chunk boundaries fall everywhere.
#include "protocols/http/response_parser.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::InputReader in(data, size);
    const std::uint8_t control = in.byte();
    static constexpr std::string_view kMethods[] = {"GET", "POST", "HEAD", "CONNECT"};
    // Small limits so the fuzzer reaches them; a 64 KiB header limit is never hit otherwise.
    http::ResponseParser parser(http::ParserLimits{4096, 16, 1 << 16, 4});
    parser.begin(kMethods[control & 3]);
    const std::size_t step = (control >> 2) == 0 ? SIZE_MAX : (control >> 2);
    auto rest = in.rest();
    while (!rest.empty()) {
        auto piece = rest.first(std::min(step, rest.size()));
        auto used = parser.feed(piece);
        if (!used) return 0;
        if (*used > piece.size()) __builtin_trap();
        if (parser.done()) {
            http::Response r = parser.take_response();
            (void)r.is_redirect();
            rest = rest.subspan(*used);
            parser.begin("GET");  // keep-alive: the next response on the same stream
            continue;
        }
        if (*used != piece.size()) __builtin_trap();  // not done: everything must be taken
        rest = rest.subspan(*used);
    }
    if (!parser.done()) (void)parser.finish_eof();
    if (parser.done()) (void)parser.take_response();
    return 0;
}
