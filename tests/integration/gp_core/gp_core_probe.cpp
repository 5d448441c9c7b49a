// Command-line access to the sans-IO GlobalProtect core, so that
// gp_core_vs_fake.py can send our request bodies to the independent fake
// gateway and feed its replies back through our parsers.
//   gp_core_probe login portal|gateway SERVER USER PASS [INPUTSTR]   -> body
//   gp_core_probe getconfig-body|logout-body < cookie                -> body
//   gp_core_probe hipcheck-body|hipreport-body IP < cookie           -> body
//   gp_core_probe parse KIND < reply   (KIND: prelogin portal login getconfig hipcheck ack)
// Parsed results are printed as "key=value" lines; errors exit 1.
#include <iostream>
#include <iterator>
#include <string>

#include "protocols/gp/hip.h"
#include "protocols/gp/portal_config.h"
#include "protocols/gp/prelogin.h"
#include "protocols/gp/requests.h"
#include "protocols/gp/tunnel_config.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {

std::string read_stdin() {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

int fail(const std::string& message) {
    std::cerr << "gp_core_probe: " << message << "\n";
    return 1;
}

// Prints a challenge or server error; true when the outcome was one of them.
template <class T>
bool print_other(const GpAuthOutcome<T>& o) {
    if (auto* c = std::get_if<GpChallenge>(&o)) {
        std::cout << "kind=challenge\nprompt=" << c->prompt << "\ninput_str=" << c->input_str << "\n";
        return true;
    }
    if (auto* e = std::get_if<GpServerError>(&o)) {
        std::cout << "kind=error\nerror_kind=" << static_cast<int>(e->kind) << "\nmessage=" << e->message << "\n";
        return true;
    }
    std::cout << "kind=ok\n";
    return false;
}

Result<GpSessionCookie> cookie_from_stdin() { return GpSessionCookie::decode(read_stdin()); }

int parse(const std::string& kind) {
    const std::string body = read_stdin();
    if (kind == "prelogin") {
        auto r = parse_prelogin_reply(body);
        if (!r) return fail(r.error().message);
        if (print_other(*r)) return 0;
        const auto& p = std::get<GpPrelogin>(*r);
        std::cout << "status=" << p.status << "\nregion=" << p.region << "\nsaml=" << p.saml.has_value() << "\n";
    } else if (kind == "portal") {
        auto r = parse_portal_config_reply(body);
        if (!r) return fail(r.error().message);
        if (print_other(*r)) return 0;
        const auto& p = std::get<GpPortalConfig>(*r);
        std::cout << "version=" << p.version << "\ngateway=" << p.preferred_gateways("")[0].address
                  << "\nhip_interval=" << p.hip_report_interval.value_or(0) << "\n";
    } else if (kind == "login") {
        auto r = parse_gateway_login_reply(body, "probe-host");
        if (!r) return fail(r.error().message);
        if (print_other(*r)) return 0;
        std::cout << "cookie=" << std::get<GpLoginResult>(*r).cookie.encode().reveal_text() << "\n";
    } else if (kind == "getconfig") {
        auto r = parse_tunnel_config_reply(body);
        if (!r) return fail(r.error().message);
        if (print_other(*r)) return 0;
        const auto& t = std::get<GpTunnelConfig>(*r);
        std::cout << "ip=" << t.tunnel.ip4_address << "\nip6=" << t.tunnel.ip6_address << "\ngw=" << t.gw_address
                  << "\nroutes=" << t.tunnel.split_include.size() << "\nesp=" << t.ipsec.has_value() << "\n";
        if (t.ipsec)
            std::cout << "enc=" << t.ipsec->enc_algo << "\nhmac=" << t.ipsec->hmac_algo
                      << "\nc2s_key_bytes=" << t.ipsec->c2s.enc_key.size() << "\n";
    } else if (kind == "hipcheck") {
        auto r = parse_hip_check_reply(body);
        if (!r) return fail(r.error().message);
        if (print_other(*r)) return 0;
        std::cout << "needed=" << std::get<bool>(*r) << "\n";
    } else if (kind == "ack") {
        auto r = parse_ack_reply(body);
        if (!r) return fail(r.error().message);
        print_other(*r);
    } else {
        return fail("unknown reply kind " + kind);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return fail("usage: see the comment at the top of gp_core_probe.cpp");
    const std::string mode = argv[1];
    GpClientInfo client;
    client.computer = "probe-host";
    if (mode == "parse" && argc == 3) return parse(argv[2]);
    if (mode == "login" && argc >= 6) {
        GpCredentials c;
        c.user = argv[4];
        c.secret = Secret::from_string(argv[5]);
        if (argc > 6) c.input_str = argv[6];
        auto iface = std::string(argv[2]) == "portal" ? GpInterface::Portal : GpInterface::Gateway;
        std::cout << login_request(iface, argv[3], client, c).body.reveal_text();
        return 0;
    }
    auto cookie = cookie_from_stdin();
    if (!cookie) return fail(cookie.error().message);
    if (mode == "getconfig-body") {
        std::cout << getconfig_request(*cookie, client).body.reveal_text();
    } else if (mode == "logout-body") {
        std::cout << logout_request(*cookie).body.reveal_text();
    } else if (mode == "hipcheck-body" && argc == 3) {
        std::cout << hip_check_request(*cookie, argv[2], "", hip_report_md5(*cookie)).body.reveal_text();
    } else if (mode == "hipreport-body" && argc == 3) {
        auto info = GpHipReportInfo::from_session(*cookie, argv[2], "", 1700000000);
        std::cout << hip_report_request(*cookie, argv[2], "", build_hip_report(info)).body.reveal_text();
    } else {
        return fail("bad arguments for " + mode);
    }
    return 0;
}
