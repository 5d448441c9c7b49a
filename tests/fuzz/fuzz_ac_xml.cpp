// libFuzzer target: what an AnyConnect server controls before the tunnel: the
// config-auth XML replies (forms, groups, success, failure), a session cookie
// given as openconnect's composite string, and the CONNECT reply's headers
// (parsed as an HTTP response, then as tunnel and DTLS parameters).
#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/connect.h"
#include "protocols/anyconnect/session_cookie.h"
#include "protocols/http/response_parser.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text = fuzz::as_text(data, size);
    if (auto reply = anyconnect::parse_auth_reply(text); reply && reply->group_list()) (void)reply->success();
    (void)anyconnect::webvpn_from_cookie_text(text);

    http::ResponseParser parser;
    parser.begin("CONNECT");
    if (auto used = parser.feed(std::span<const std::uint8_t>(data, size)); !used) return 0;
    if (!parser.done() && !parser.finish_eof()) return 0;
    if (!parser.done()) return 0;
    anyconnect::AcConnectRefusal refusal;
    (void)anyconnect::parse_connect_reply(parser.take_response(), &refusal);
    return 0;
}
