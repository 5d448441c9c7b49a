// libFuzzer target: what an AnyConnect server controls before the tunnel: the
// config-auth XML replies (forms, groups, success, failure; a <session-token> redacted for a
// dump), a CSD wait page, a session cookie
// given as openconnect's composite string, and the CONNECT reply's headers
// (parsed as an HTTP response, then as tunnel and DTLS parameters); and the external-browser
// SSO token as the loopback request carries it (a STRAP blob, opened with a fixed key).
#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/connect.h"
#include "protocols/anyconnect/csd.h"
#include "protocols/anyconnect/session_cookie.h"
#include "protocols/anyconnect/strap.h"
#include "protocols/http/response_parser.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text = fuzz::as_text(data, size);
    if (auto reply = anyconnect::parse_auth_reply(text); reply && reply->group_list()) (void)reply->success();
    (void)anyconnect::redact_session_token(text);
    (void)anyconnect::classify_wait_page(text);
    (void)anyconnect::webvpn_from_cookie_text(text);
    static const auto strap_key = [] {
        const std::uint8_t scalar[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                         17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
        auto key = crypto::EciesP256Key::from_scalar(scalar);
        return std::move(*key);
    }();
    (void)anyconnect::open_strap_token(strap_key, text);

    http::ResponseParser parser;
    parser.begin("CONNECT");
    if (auto used = parser.feed(std::span<const std::uint8_t>(data, size)); !used) return 0;
    if (!parser.done() && !parser.finish_eof()) return 0;
    if (!parser.done()) return 0;
    anyconnect::AcConnectRefusal refusal;
    (void)anyconnect::parse_connect_reply(parser.take_response(), &refusal);
    return 0;
}
