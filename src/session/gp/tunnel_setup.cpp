#include "src/session/gp/tunnel_setup.h"

#include <ctime>
#include <sstream>
#include <variant>

#include "protocols/base/hex.h"
#include "protocols/gp/hip.h"
#include "src/io/udp_socket.h"
#include "src/session/csd_program.h"
#include "src/log/logger.h"

namespace espvpn::session {

GpTunnelSetup map_gp_tunnel_config(gp::GpTunnelConfig gp, const std::string& peer_address,
                                   const std::string& esp_address) {
    GpTunnelSetup setup;
    TunnelConfig& c = setup.config;
    c = std::move(gp.tunnel);
    c.gateway_address = peer_address;
    if (!esp_address.empty() && esp_address != peer_address) c.direct_udp_address = esp_address;
    setup.https_tunnel_path = gp.ssl_tunnel_url;
    setup.cookie_lifetime_s = gp.lifetime;
    setup.hip_report_interval_s = gp.hip_report_interval;
    if (gp.ipsec && esp_address.empty()) {
        LOG_INFO << "no address for ESP to the gateway: HTTPS tunnel only";
    } else if (gp.ipsec) {
        GpEspSetup esp;
        esp.peer_address = esp_address;
        esp.udp_port = gp.ipsec->udp_port;
        esp.probe_ipv4 = gp.gw_address;
        esp.tunnel_ipv4 = c.ip4_address;
        esp.rekey_after_s = gp.timeout;
        esp.sa = std::move(*gp.ipsec);
        setup.esp = std::move(esp);
    }
    return setup;
}

template <class T>
Result<T> GpGatewaySession::exchange(const gp::GpRequest& request,
                                     Result<gp::GpAuthOutcome<T>> (*parse)(std::string_view), const char* what) {
    auto reply = http_.send(gateway_, request);
    if (!reply) return reply.error();
    auto outcome = parse(reply->body.reveal_text());
    const std::string where = std::string(what) + " on " + gateway_.host;
    if (!outcome) return make_error(where + ": unusable reply: " + outcome.error().message);
    if (auto* done = std::get_if<T>(&*outcome)) return std::move(*done);
    if (std::holds_alternative<gp::GpChallenge>(*outcome))
        return make_error(where + ": unexpected challenge after login");
    const auto& e = std::get<gp::GpServerError>(*outcome);
    if (e.kind == gp::GpErrorKind::CookieRejected || e.kind == gp::GpErrorKind::AuthFailed) cookie_rejected_ = true;
    std::string text = where + " failed: " + (e.message.empty() ? "no reason given" : e.message);
    if (reply->status != 200) text += " (HTTP " + std::to_string(reply->status) + ")";
    if (cookie_rejected_) text += "; the session cookie is no longer valid: log in again";
    return make_error(text);
}

Result<GpTunnelSetup> GpGatewaySession::fetch_config() {
    auto config = exchange(gp::getconfig_request(cookie_, client_), gp::parse_tunnel_config_reply, "getconfig");
    if (!config) return config.error();
    std::string peer, esp_peer;
    if (auto p = http_.https().peer(gateway_.host, gateway_.port)) {
        peer = p->address;
        esp_peer = p->server_address;
        if (p->via_proxy && !esp_peer.empty())
            LOG_INFO << "ESP goes directly to " << gateway_.host << " at " << esp_peer << " (not through the proxy)";
    }
    return map_gp_tunnel_config(std::move(*config), peer, esp_peer);
}

Result<std::string> GpGatewaySession::report_from_wrapper(const GpHipSettings& hip, const std::string& ip,
                                                          const std::string& ip6, const std::string& md5) {
    ProgramRun run;
    run.program = hip.csd_wrapper;
    // openconnect passes the whole cookie; the script only needs user, domain and
    // computer, so the authcookie stays off argv.
    run.args = {"--cookie", cookie_.hip_md5_input(), "--client-ip", ip, "--md5", md5, "--client-os", client_.clientos};
    if (!ip6.empty()) run.args.insert(run.args.begin() + 4, {"--client-ipv6", ip6});
    run.extra_env = {"APP_VERSION=" + client_.app_version};
    run.run_as_user = hip.csd_user;
    run.timeout = hip.wrapper_timeout;
    run.cancel_fd = hip.cancel_fd;
    auto out = run_for_output(run);
    if (!out) return make_error("HIP report program: " + out.error().message);
    if (out->find("<hip-report") == std::string::npos)
        return make_error("HIP report program " + hip.csd_wrapper + " printed no <hip-report> document");
    return out;
}

Result<bool> GpGatewaySession::check_hip(const std::string& ip, const std::string& ip6, const GpHipSettings& hip) {
    const std::string md5 = gp::hip_report_md5(cookie_);
    auto needed = exchange(gp::hip_check_request(cookie_, ip, ip6, md5), gp::parse_hip_check_reply, "hipreportcheck");
    if (!needed) return needed.error();
    if (!*needed) {
        LOG_INFO << "HIP: the gateway needs no report";
        return false;
    }
    std::string report;
    if (!hip.csd_wrapper.empty()) {
        auto out = report_from_wrapper(hip, ip, ip6, md5);
        if (!out) return out.error();
        report = std::move(*out);
    } else {
        auto info = gp::GpHipReportInfo::from_session(cookie_, ip, ip6, std::time(nullptr));
        info.client_version = client_.app_version;
        info.host_name = client_.computer;
        report = gp::build_hip_report(info);
    }
    auto ack = exchange(gp::hip_report_request(cookie_, ip, ip6, report), gp::parse_ack_reply, "hipreport");
    if (!ack) return ack.error();
    LOG_INFO << "HIP: report sent (" << (hip.csd_wrapper.empty() ? "built-in generator" : hip.csd_wrapper)
             << ") and accepted";
    return true;
}

Status GpGatewaySession::logout() {
    auto ack = exchange(gp::logout_request(cookie_), gp::parse_ack_reply, "logout");
    if (!ack) return ack.error();
    LOG_INFO << "logged out of " << gateway_.host;
    return {};
}

std::string describe_tunnel_setup(const GpTunnelSetup& s) {
    std::ostringstream o;
    const auto& c = s.config;
    auto list = [](const auto& items) {
        std::string out;
        for (const auto& i : items) {
            if (!out.empty()) out += " ";
            if constexpr (std::is_same_v<std::decay_t<decltype(i)>, IpPrefix>) out += i.to_string();
            else out += i;
        }
        return out.empty() ? std::string("-") : out;
    };
    o << "gateway address: " << (c.gateway_address.empty() ? "-" : c.gateway_address) << "\n";
    o << "IPv4 address: " << (c.ip4_address.empty() ? "-" : c.ip4_address)
      << (c.ip4_netmask.empty() ? "" : " netmask " + c.ip4_netmask) << "\n";
    o << "IPv6 address: " << (c.ip6_address.empty() ? "-" : c.ip6_address + "/" + std::to_string(c.ip6_prefix))
      << "\n";
    o << "MTU: " << (c.mtu ? std::to_string(c.mtu) : "not given (computed by the data path)") << "\n";
    o << "DNS: " << list(c.dns) << "\n";
    o << "search domains: " << (c.default_domain.empty() ? "-" : c.default_domain) << "\n";
    o << "include routes: " << (c.split_include.empty() ? "default route" : list(c.split_include)) << "\n";
    o << "exclude routes: " << list(c.split_exclude) << "\n";
    if (s.esp) {
        const auto& e = *s.esp;
        o << "ESP: " << e.sa.enc_algo << (e.sa.hmac_algo.empty() ? "" : "+" + e.sa.hmac_algo) << " to "
          << io::endpoint_text(e.peer_address, e.udp_port) << ", SPI out " << hex32(e.sa.c2s.spi) << " in " << hex32(e.sa.s2c.spi)
          << ", probe " << (e.probe_ipv4.empty() ? "-" : e.probe_ipv4)
          << (e.rekey_after_s ? ", rekey after " + std::to_string(e.rekey_after_s) + " s" : "") << "\n";
    } else {
        o << "ESP: not offered (HTTPS tunnel only)\n";
    }
    o << "HTTPS tunnel path: " << s.https_tunnel_path << "\n";
    return o.str();
}

}  // namespace espvpn::session
