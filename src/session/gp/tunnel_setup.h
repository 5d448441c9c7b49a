// After login: the gateway's getconfig (the tunnel configuration and ESP SAs),
// the HIP check (and report when asked), and logout. Turns the GP config into
// the protocol-independent TunnelConfig plus the ESP parameters the data path
// consumes.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "protocols/base/result.h"
#include "protocols/gp/requests.h"
#include "protocols/gp/session_cookie.h"
#include "protocols/gp/tunnel_config.h"
#include "src/session/gp/request_sender.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::session {

// What the ESP data path needs to start: where to send, which SA pair, and
// what to probe (docs/protocols/globalprotect.md §10). Valid until the next getconfig.
struct GpEspSetup {
    std::string peer_address;     // numeric address of the gateway (HTTPS peer)
    std::uint16_t udp_port = 4501;
    gp::GpIpsecConfig sa;         // suite, SPIs and keys, both directions (keys are Secrets)
    std::string probe_ipv4;       // gw-address: ESP probe destination, "" if none
    std::string tunnel_ipv4;      // our inner source for the probe
    unsigned rekey_after_s = 0;   // getconfig <timeout>; 0 = not given
};

struct GpTunnelSetup {
    TunnelConfig config;
    std::optional<GpEspSetup> esp;   // absent: the gateway offers no ESP (HTTPS tunnel only)
    std::string https_tunnel_path;   // ssl-tunnel-url
    unsigned cookie_lifetime_s = 0;
    unsigned hip_report_interval_s = 0;  // getconfig's hip-report-interval (0: not given)
};

// A parsed getconfig (its TunnelConfig already filled by the parser) with where we reached
// the gateway: `peer_address` is the gateway's numeric address, `esp_address` where ESP goes:
// the same address, or with --proxy the gateway's own (empty: no ESP, HTTPS tunnel only).
GpTunnelSetup map_gp_tunnel_config(gp::GpTunnelConfig gp_config, const std::string& peer_address,
                                   const std::string& esp_address);
inline GpTunnelSetup map_gp_tunnel_config(gp::GpTunnelConfig gp_config, const std::string& peer_address) {
    return map_gp_tunnel_config(std::move(gp_config), peer_address, peer_address);
}

struct GpHipSettings {
    std::string csd_wrapper;   // --csd-wrapper: program that prints the report XML
    std::string csd_user;      // run it as this user (when we are root)
    std::chrono::seconds wrapper_timeout{30};
    int cancel_fd = -1;        // readable: the wrapper is killed and the check ends (hip_renewal.h)
};

class GpGatewaySession {
public:
    // `cookie_rejected` is set when the gateway refused the session cookie
    // (expired or bogus): openconnect's exit code 2.
    GpGatewaySession(GpRequestSender& sender, http::Url gateway, gp::GpSessionCookie cookie, gp::GpClientInfo client)
        : http_(sender), gateway_(std::move(gateway)), cookie_(std::move(cookie)), client_(std::move(client)) {}

    Result<GpTunnelSetup> fetch_config();
    // hipreportcheck.esp; when the gateway wants a report, sends one. Returns
    // whether a report was sent.
    Result<bool> check_hip(const GpTunnelSetup& setup, const GpHipSettings& hip) {
        return check_hip(setup.config.ip4_address, setup.config.ip6_address, hip);
    }
    // The same with the tunnel addresses the last getconfig gave.
    Result<bool> check_hip(const std::string& ip, const std::string& ip6, const GpHipSettings& hip);
    // The same session on another HTTPS client (the periodic HIP thread's own connection).
    GpGatewaySession with_sender(GpRequestSender& sender) const {
        return GpGatewaySession(sender, gateway_, cookie_.clone(), client_);
    }
    Status logout();

    bool cookie_rejected() const { return cookie_rejected_; }
    const gp::GpSessionCookie& cookie() const { return cookie_; }
    const http::Url& gateway() const { return gateway_; }
    io::HttpsClient& https() { return http_.https(); }

private:
    // Sends `request` to the gateway and reads its reply with `parse`: what it carries, or an
    // error naming `what` (a refused cookie or login sets cookie_rejected).
    template <class T>
    Result<T> exchange(const gp::GpRequest& request, Result<gp::GpAuthOutcome<T>> (*parse)(std::string_view),
                       const char* what);
    Result<std::string> report_from_wrapper(const GpHipSettings& hip, const std::string& ip, const std::string& ip6,
                                            const std::string& md5);

    GpRequestSender& http_;
    http::Url gateway_;
    gp::GpSessionCookie cookie_;
    gp::GpClientInfo client_;
    bool cookie_rejected_ = false;
};

// One line per item of the configuration, for logs and the CLI (no secrets:
// SPIs and algorithms only, never keys).
std::string describe_tunnel_setup(const GpTunnelSetup& setup);

}  // namespace espvpn::session
