// libFuzzer target: every GlobalProtect reply parser on the same body (a
// gateway or portal controls all of them): prelogin, portal getconfig, gateway
// login (jnlp), gateway getconfig (tunnel config), HIP check, plain ack, and the
// SAML ACS / globalprotect:// callback parsers.
#include "protocols/gp/auth_reply.h"
#include "protocols/gp/hip.h"
#include "protocols/gp/portal_config.h"
#include "protocols/gp/prelogin.h"
#include "protocols/gp/saml.h"
#include "protocols/gp/session_cookie.h"
#include "protocols/gp/tunnel_config.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view body = fuzz::as_text(data, size);
    (void)gp::parse_prelogin_reply(body);
    (void)gp::parse_portal_config_reply(body);
    (void)gp::parse_gateway_login_reply(body, "fuzz-host");
    if (auto tc = gp::parse_tunnel_config_reply(body); tc) (void)tc->index();
    (void)gp::parse_hip_check_reply(body);
    (void)gp::parse_ack_reply(body);
    (void)gp::html_body_text(body);
    (void)gp::parse_saml_acs_result({{"saml-auth-status", "1"}, {"prelogin-cookie", "c"}}, body);
    (void)gp::parse_globalprotect_callback(body);
    (void)gp::GpSessionCookie::decode(body);
    return 0;
}
