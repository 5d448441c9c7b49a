// libFuzzer target: what an AnyConnect server sends before the tunnel. The
// first byte picks the parser: the config-auth XML (parse_auth_reply, then the
// group choice), the cookie text (webvpn_from_cookie_text), or a CONNECT reply
// (HTTP response parser, then parse_connect_reply).
#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/connect.h"
#include "protocols/anyconnect/session_cookie.h"
#include "protocols/http/response_parser.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::InputReader in(data, size);
    const std::uint8_t which = in.byte() % 3;
    const auto rest = in.rest();
    const std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());
    if (which == 0) {
        auto reply = anyconnect::parse_auth_reply(text);
        if (reply && reply->group_list()) (void)anyconnect::choose_option(*reply->group_list(), "group");
    } else if (which == 1) {
        (void)anyconnect::webvpn_from_cookie_text(text);
    } else {
        http::ResponseParser parser(http::ParserLimits{8192, 64, 1 << 16, 4});
        parser.begin("CONNECT");
        auto used = parser.feed(rest);
        if (!used) return 0;
        if (!parser.done()) (void)parser.finish_eof();
        if (!parser.done()) return 0;
        anyconnect::AcConnectRefusal refusal;
        auto config = anyconnect::parse_connect_reply(parser.take_response(), &refusal);
        if (config && config->dtls && config->dtls->cipher_suite.empty()) __builtin_trap();
    }
    return 0;
}
