// Captive portals (docs/SERVICE.md): when the gateway cannot be reached, one plain-HTTP probe
// (io/http_probe, judged by protocols/captive) tells whether a portal stands in between. Run
// by the session loop after a failed reconnect attempt (on a thread of its own) and by the CLI
// between sessions; unprivileged, bounded by kProbeTimeout and captive::kMaxAnswerBytes.
#pragma once

#include <chrono>
#include <memory>

#include <string>
#include <vector>

#include "protocols/captive/captive_probe.h"
#include "src/io/http_probe.h"

namespace espvpn::session {

inline constexpr std::chrono::milliseconds kProbeTimeout{5000};

// The verdict on the network now; a probe that got no answer is Kind::unknown with why.
// `cancel_fd` (-1: none): readable ends it at once (unknown). Logs nothing (it runs on
// detached threads, which may outlive the logger at exit): the caller logs the verdict.
// `route`: where to connect (io::ProbeRoute; by default the URL's host looked up now).
captive::Verdict probe_for_captive_portal(const captive::ProbeSpec& spec, int cancel_fd = -1, io::ProbeRoute route = {});

// The probe host's addresses, looked up on a detached thread each time the tunnel carries
// (its DNS answers then; during an outage no DNS server may): the last ones found, empty until
// one lookup succeeded. A numeric host needs none.
class ProbeAddresses {
public:
    explicit ProbeAddresses(const captive::ProbeSpec& spec);
    // Starts a lookup (not for a numeric host); a failed one keeps what was found before.
    void look_up();
    std::vector<std::string> get() const;

private:
    struct Shared;
    std::shared_ptr<Shared> shared_;
    std::string host_;  // "" when numeric
};

// One probe on a detached thread: the session loop polls done_fd(). Dropping it never waits
// (a name lookup cannot be interrupted: the thread finishes on its own and is forgotten), so a
// probe never delays the end of a session.
class BackgroundProbe {
public:
    BackgroundProbe(const captive::ProbeSpec& spec, io::ProbeRoute route);
    ~BackgroundProbe();
    BackgroundProbe(const BackgroundProbe&) = delete;
    BackgroundProbe& operator=(const BackgroundProbe&) = delete;
    int done_fd() const;
    bool done() const;
    // After done().
    captive::Verdict verdict() const;

private:
    struct Shared;
    std::shared_ptr<Shared> shared_;
};

}  // namespace espvpn::session
