// The GlobalProtect tunnel over ESP, once logged in: tun device, host
// configuration (built-in or vpnc-script), UDP socket, the datapath threads,
// the ESP probe, dead-peer detection and rekey (a new getconfig whose SAs are
// installed beside the old ones), until a signal ends it.
//
// Everything here runs on the control thread; the datapath never waits for it.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "crypto/result.h"
#include "src/session/gp_tunnel_setup.h"

namespace espvpn::session {

struct EspTunnelOptions {
    std::string interface_name;   // -i: name or a pre-created persistent tun
    std::string script;           // --script: vpnc-script command line ("" = built-in setup)
    int mtu = 0;                  // --mtu; 0 = computed from base_mtu and the suite
    int base_mtu = 0;             // --base-mtu; 0 = 1406, openconnect's default
    std::string stats_json;       // --stats-json FILE
    int log_level = 1;            // for the script's LOG_LEVEL
    bool disable_ipv6 = false;
    std::chrono::seconds probe_timeout{10};   // no probe reply by then: give up on ESP
    std::chrono::seconds dpd_interval{10};    // quiet this long: probe
    std::chrono::seconds dead_after{20};      // quiet this long: ESP is dead
    // Host-integration hooks (src/cli): called once on the control thread.
    // after_setup: tun, its configuration and the UDP socket are ready, nothing else
    // needs privileges (--setuid drops them here); an error ends the tunnel.
    std::function<Status()> after_setup;
    // on_connected: ESP answered for the first time (-b detaches here).
    std::function<void()> on_connected;
};

// Why the tunnel ended.
enum class TunnelEnd {
    user_logout,      // SIGINT / SIGTERM: log out
    user_keep_cookie, // SIGHUP: disconnect, keep the session valid
    esp_failed,       // no probe reply, or ESP died and could not be revived
    error,            // setup failed, or a rekey was refused
    cookie_rejected,  // the gateway refused our cookie at rekey
};

// A new getconfig for rekey; returns fresh SAs (and must not block for long).
using RefetchConfig = std::function<Result<GpTunnelSetup>()>;

// The tunnel MTU for ESP over UDP (openconnect's calculation, doc 10.9).
int esp_tunnel_mtu(int base_mtu, bool outer_ipv6, std::size_t iv_size, std::size_t icv_size);

// Runs the tunnel until it ends; errors before traffic flows are returned as
// Error, later endings as a TunnelEnd with the reason logged.
Result<TunnelEnd> run_esp_tunnel(const GpTunnelSetup& setup, const EspTunnelOptions& options,
                                 const RefetchConfig& refetch);

}  // namespace espvpn::session
