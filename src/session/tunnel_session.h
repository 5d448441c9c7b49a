// One tunnel session loop for both protocols (openconnect's mainloop over its
// vpn_proto table): the core owns the signals (SignalWatch), the host side
// (host::TunnelHost: tun, routes, DNS, scripts), the stats reporter, the attempts
// (LinkAttempt, one at a time, on their own thread) and the decisions
// (SessionControl: outage, reconnect, give-up, end reason). A protocol driver
// (gp/tunnel.h, anyconnect/tunnel.h) opens its first link, steps it (liveness,
// rekey due: LinkEvents), makes new links on the attempt thread, adopts them, and
// logs out.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/captive/captive_probe.h"
#include "src/datapath/stats_reporter.h"
#include "src/io/state_files.h"
#include "src/session/link_attempt.h"
#include "src/session/session_control.h"
#include "src/session/trusted_network.h"
#include "protocols/tunnel/tunnel_config.h"
#include "src/host/host.h"
#include "src/host/tunnel_host.h"

namespace espvpn::session {

class StatusBoard;
class StatusServer;

// The tunnel options of both protocols (src/cli fills them once).
struct TunnelOptions {
    host::TunnelHostOptions host;
    int mtu = 0;               // --mtu; 0: the server's, else computed from base_mtu
    int base_mtu = 0;          // --base-mtu; 0: 1406, openconnect's default
    std::string stats_json;    // --stats-json FILE
    io::StateFiles* state_files = nullptr;  // writes stats_json; needed when it is set (src/cli's)
    std::chrono::seconds reconnect_timeout{300};  // --reconnect-timeout: how long to try after losing the link
    int force_dpd_s = 0;       // --force-dpd
    bool no_dtls = false;      // --no-dtls: GP: the HTTPS tunnel only; AnyConnect: CSTP only
    int udp_local_port = 0;    // --dtls-local-port: the ESP/DTLS socket's local port (0 = any)
    std::chrono::seconds udp_retry{60};  // GP on HTTPS: try ESP again this often; AnyConnect: DTLS retry
    bool dry_run = false;      // connect and show the configuration, then log out; no tun
    std::string hostname;      // AnyConnect X-CSTP-Hostname (src/cli: --local-hostname or the machine's)
    std::string user_agent;    // AnyConnect
    std::string dtls_ciphers;  // AnyConnect --dtls-ciphers: X-DTLS-CipherSuite instead of ours
    std::string dtls12_ciphers;  // AnyConnect --dtls12-ciphers: X-DTLS12-CipherSuite
    bool keeps_privileges = true;  // false with --setuid: nothing may need root after after_setup
    // The host side (host.h): unset, a TunnelHost in this process; set (the session process of
    // the privilege split), the broker's client. udp_socket: how the ESP/DTLS sockets are made
    // (io::UdpOptions::make_socket; unset: here).
    std::function<std::unique_ptr<host::Host>(const host::TunnelHostOptions&)> make_host;
    std::function<Result<io::UniqueFd>(int family, int send_buffer, int receive_buffer)> udp_socket;
    bool always_on = false;        // --always-on: an outage never ends the session
    // The status socket (status_server.h), when there is one: the loop reports its state on
    // `status_board` and serves the disconnect/reconnect requests of `status_server`.
    StatusBoard* status_board = nullptr;
    StatusServer* status_server = nullptr;
    // Captive portals (captive_portal.h): probed after each failed reconnect attempt (nullopt:
    // never, --no-captive-probe). When a portal answers, the session ends (TunnelEnd::captive_portal,
    // its cookie still valid) with the kill switch held by the host, and what was found is
    // written to *captive_portal (when set) for the caller, which waits for the portal to let go.
    std::optional<captive::ProbeSpec> captive_probe;
    struct CaptiveFound {
        std::string url;                           // the portal's page (printable)
        std::vector<std::string> probe_addresses;  // the probe host's, as the tunnel's DNS gave them
    };
    CaptiveFound* captive_portal = nullptr;
    // Trusted networks while connected (--always-on with --trusted-server and no
    // --trusted-domain): on a change of the host's own links, addresses or routes (not the
    // tun's), the servers are asked on the host's marked sockets around the tunnel
    // (BackgroundTrustedCheck). When one passes, the session logs out (TunnelEnd::user_logout)
    // and the verdict is written to *trusted_found for the caller, which stays off until the
    // network is left.
    TrustedRules trusted_while_up;
    std::string* trusted_found = nullptr;
    // Host-integration hooks (src/cli), called on the control thread.
    // after_setup: the tun, its configuration and the first link exist, nothing else needs
    // privileges (--setuid drops them here); an error ends the session.
    std::function<Status()> after_setup;
    // on_connected: traffic flows for the first time; -b detaches here.
    std::function<void()> on_connected;
};

// What a driver's step saw.
struct LinkEvent {
    enum class Kind {
        up,     // the link carries data (first time, or after a reconnect): `text` = "to ..."/"over ..."
        lost,   // the link died, reconnectable: `text` = why
        ended,  // the session is over: `end`, `text` = why
        renew,  // a new link (or keys) is due beside this one: `purpose`, `text` = why
    };
    Kind kind;
    std::string text;
    std::string suffix;  // up: appended to the "reconnected" line
    TunnelEnd end = TunnelEnd::error;
    AttemptPurpose purpose = AttemptPurpose::renew;
    bool scripts = false;  // renew: attempt-reconnect / reconnect scripts around it

    static LinkEvent up(std::string detail, std::string suffix = {}) {
        return {Kind::up, std::move(detail), std::move(suffix), TunnelEnd::error};
    }
    static LinkEvent lost(std::string why) { return {Kind::lost, std::move(why), {}}; }
    static LinkEvent ended(TunnelEnd end, std::string why) { return {Kind::ended, std::move(why), {}, end}; }
    static LinkEvent renew(AttemptPurpose purpose, std::string why, bool scripts) {
        return {Kind::renew, std::move(why), {}, TunnelEnd::error, purpose, scripts};
    }
};

class SessionDriver {
public:
    using Clock = std::chrono::steady_clock;
    virtual ~SessionDriver() = default;

    // What the host comes up with: the first link's configuration and the tun MTU.
    struct HostPlan {
        TunnelConfig config;
        int mtu = 0;
    };
    using Prepared = std::variant<HostPlan, TunnelEnd>;
    // Before the host (AnyConnect: the first CONNECT). An Error before any traffic, or an
    // end instead of a plan (a refused cookie, a dry run that logged out).
    virtual Result<Prepared> prepare() = 0;
    // The host is up: the first link starts. It returns the link's `up` when it carries data
    // at once (else a later step reports it), or an `ended` (a refused cookie); nullopt:
    // not up yet. An error ends the session.
    virtual Result<std::optional<LinkEvent>> start(host::Host& host) = 0;
    // "peer" for messages, and what a reconnect attempt does.
    virtual std::string peer() const = 0;
    virtual std::string attempt_text() const = 0;
    // What carries the traffic now, for the status socket: "ESP", "HTTPS", "DTLS", "CSTP"; "": no link.
    virtual std::string transport_name() const { return {}; }
    // How long the session (its cookie) is valid from its login, when the server said (GP: the
    // getconfig's lifetime; AnyConnect: X-CSTP-Session-Timeout); 0: not known.
    virtual int session_lifetime_s() const { return 0; }
    virtual datapath::StatsView stats_view() = 0;

    // One control-loop step (no link during an outage: may do nothing).
    virtual std::vector<LinkEvent> step(Clock::time_point now, const SessionControl& control) = 0;
    // How long the loop may sleep now.
    virtual int poll_ms() const { return 100; }
    // Roaming (path_rule.h): the server's numeric address the link's packets go to ("": the
    // path is not watched); probe the link now (GP: an ESP probe, AnyConnect: a DPD; false:
    // it cannot be probed); the link's last authentic packet from the server.
    virtual std::string path_peer() const { return {}; }
    virtual bool probe_path() { return false; }
    virtual Clock::time_point last_receive() const { return {}; }
    // Non-empty: why SIGUSR2 cannot renew now (e.g. a TLS rehandshake runs).
    virtual std::string renew_blocked() const { return {}; }

    // Starts making a new link (or keys) on its own thread.
    virtual std::unique_ptr<LinkAttempt> begin_attempt(AttemptPurpose purpose) = 0;
    // The attempt's thread has ended: adopt its result.
    virtual AttemptResult finish_attempt(AttemptPurpose purpose, bool in_outage, const std::string& why) = 0;
    // The link is lost: stop it (the tun stays up).
    virtual void drop_link() = 0;
    // The outage ended (for the driver's counters).
    virtual void outage_ended(Clock::duration) {}
    // The configuration the server sent with the attempt just finished (GP: its getconfig),
    // once; nullopt when there was none. The host keeps the first one; the session core
    // compares what it can change (the domain-based split tunnel's lists).
    virtual std::optional<TunnelConfig> take_new_config() { return std::nullopt; }
    // A user logout: tell the server while a link exists.
    virtual void logout() = 0;
    // The session ends: stop every link (before the host goes) and log the last statistics.
    virtual void stop() = 0;
};

// Runs the session until it ends. Errors before traffic flows are returned as
// Error, later endings as a TunnelEnd with the reason logged.
Result<TunnelEnd> run_tunnel_session(SessionDriver& driver, const TunnelOptions& options);

}  // namespace espvpn::session
