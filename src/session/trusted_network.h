// Trusted network detection for --always-on (docs/SERVICE.md), as Cisco Secure Client's
// "Trusted Network Detection" decides it: the host is on a trusted network when
//   --trusted-domain: a DNS search domain of the host (/etc/resolv.conf's "search" and
//     "domain" lines; systemd-resolved writes every link's domains there too, so no bus
//     is needed) equals one of these domains (case-insensitive; "*.example.com" also
//     takes any name below example.com), as Cisco's TrustedDNSDomains; and
//   --trusted-server HOST:PORT,PIN: a TLS server that answers within the bound (2 s)
//     with a certificate matching PIN (pin-sha256:..., sha256:..., as --servercert), as
//     Cisco's trusted HTTPS server with its certificate hash.
// Any domain of the list and any server of the list will do; when both lists are
// given, both must hold (as Cisco's TND does with several criteria).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "src/io/server_pin.h"
#include "src/io/tls_probe.h"

namespace espvpn::session {

struct TrustedServer {
    std::string host;
    std::uint16_t port = 0;
    std::string pin_text;  // as given, for the log
    io::ServerCertPin pin;
};
// "HOST:PORT,PIN" ("[v6]:PORT,PIN"): a strong pin is required (see the .cpp).
Result<TrustedServer> parse_trusted_server(std::string_view text);
// A DNS domain ("corp.example.com", "*.example.com"): lower-cased, no trailing dot.
Result<std::string> parse_trusted_domain(std::string_view text);

// The search domains of a resolv.conf text, in order, lower-cased, without trailing dots.
std::vector<std::string> resolv_conf_domains(std::string_view text);
bool domain_matches(std::string_view trusted, std::string_view domain);

struct TrustedRules {
    std::vector<std::string> domains;
    std::vector<TrustedServer> servers;
    bool empty() const { return domains.empty() && servers.empty(); }
};

struct TrustedVerdict {
    bool trusted = false;
    // One line for the log: "trusted network: search domain corp.example matches
    // --trusted-domain corp.example; 10.1.1.1:443 presented pin-sha256:..." or
    // "untrusted network: ..." with what did not match.
    std::string reason;
};

// How the checks see the host (tests replace them).
struct TrustedProbes {
    std::function<Result<std::string>()> read_resolv_conf;  // the text of /etc/resolv.conf
    std::function<Result<io::ServerFingerprints>(const TrustedServer&, std::chrono::milliseconds)> fetch_certificate;
};
TrustedProbes host_probes();

inline constexpr std::chrono::milliseconds kTrustedServerBudget{2000};

// `rules` not empty. The servers are asked at once, each on a thread of its own; the call
// returns after `budget` at most (a server still being asked then is left to finish).
TrustedVerdict detect_trusted_network(const TrustedRules& rules, const TrustedProbes& probes = host_probes(),
                                      std::chrono::milliseconds budget = kTrustedServerBudget);

// While a tunnel is up (--always-on, --trusted-server without --trusted-domain): one check of
// the servers on a detached thread, on sockets the host made to take the way around the tunnel
// (Host::open_probe_socket: marked, routed by the host's own default route), one pair per
// server in `rules.servers`' order; a server without one is not asked (never through the
// tunnel), nor is one whose connection ends up on `tun_name`. The session loop polls
// done_fd(); dropping the check never waits (it ends by itself within `budget`).
class BackgroundTrustedCheck {
public:
    BackgroundTrustedCheck(const TrustedRules& rules, std::vector<io::TlsProbeRoute> routes,
                           std::chrono::milliseconds budget = kTrustedServerBudget);
    BackgroundTrustedCheck(const BackgroundTrustedCheck&) = delete;
    BackgroundTrustedCheck& operator=(const BackgroundTrustedCheck&) = delete;
    int done_fd() const;
    bool done() const;
    // After done().
    TrustedVerdict verdict() const;

private:
    struct Shared;
    std::shared_ptr<Shared> shared_;
};

}  // namespace espvpn::session
