// Cheap stand-in for fuzzing until tests/fuzz/ has GP targets: every prefix
// and a deterministic set of byte mutations of each fixture must give either
// a value or an error, never a crash (run under ASan/UBSan by tools/test --sanitize).
#include <doctest/doctest.h>

#include <cstdint>

#include "fixture.h"
#include "protocols/gp/hip.h"
#include "protocols/gp/portal_config.h"
#include "protocols/gp/prelogin.h"
#include "protocols/gp/session_cookie.h"
#include "protocols/gp/tunnel_config.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {

// Runs every reply parser; returns how many accepted the input.
int parse_everything(std::string_view body) {
    int accepted = 0;
    accepted += parse_prelogin_reply(body).ok();
    accepted += parse_portal_config_reply(body).ok();
    accepted += parse_gateway_login_reply(body, "host").ok();
    accepted += parse_tunnel_config_reply(body).ok();
    accepted += parse_hip_check_reply(body).ok();
    return accepted;
}

}  // namespace

TEST_CASE("gp parsers survive every truncation and byte mutation of the fixtures") {
    const char* names[] = {"getconfig_fake_server.xml", "getconfig_full.xml", "portal_config.xml",
                           "login_jnlp.xml", "challenge_html.txt"};
    std::uint32_t rng = 12345;
    auto next = [&] { return rng = rng * 1664525u + 1013904223u; };
    for (const char* name : names) {
        CAPTURE(name);
        const std::string full = gp_fixture(name);
        CHECK(parse_everything(full) >= 1);  // each fixture is some parser's valid input
        for (std::size_t n = 0; n < full.size(); n += 7) parse_everything(full.substr(0, n));
        const char specials[] = {'<', '>', '&', '/', '"', '\0', '\xff', ';', '\\'};
        for (int i = 0; i < 300; ++i) {
            std::string m = full;
            for (int k = 0; k < 3; ++k)
                m[next() % m.size()] = (next() & 1) ? specials[next() % sizeof specials]
                                                    : static_cast<char>(next());
            parse_everything(m);
        }
    }
}

TEST_CASE("gp tunnel config: a truncated fake-server reply is an error, not a partial config") {
    const std::string full = gp_fixture("getconfig_fake_server.xml");
    const std::size_t end = full.rfind("</response>");
    for (std::size_t n = 1; n < end; ++n) {
        auto r = parse_tunnel_config_reply(full.substr(0, n));
        CAPTURE(n);
        CHECK_FALSE(r.ok());
    }
}
