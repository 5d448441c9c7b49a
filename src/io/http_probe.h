// The captive-portal probe's request (protocols/captive): one plain-HTTP GET, no redirect
// followed, no cookie, bounded in time (name lookup aside: connect and answer within
// `timeout`) and in size (captive::kMaxAnswerBytes: the rest of a longer answer is never
// read). Runs in the unprivileged session process; the answer is the network's, parsed by
// the sans-IO code.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/captive/captive_probe.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

// Where the probe connects: `addresses` (numeric; empty: the URL's host is looked up now) and,
// per family, a socket made elsewhere (during a tunnel outage: marked by the privileged side so
// that it takes the way around the tunnel; invalid: one is made here). Each socket is used once.
struct ProbeRoute {
    std::vector<std::string> addresses;
    UniqueFd v4, v6;
};

// `cancel_fd` (-1: none): readable ends every wait at once.
Result<captive::ProbeAnswer> http_probe(const captive::HttpUrl& url, std::chrono::milliseconds timeout,
                                        int cancel_fd = -1, ProbeRoute route = {});

// The numeric addresses `host` resolves to (IPv4 first), or the error (for the log).
Result<std::vector<std::string>> resolve_probe_host(const std::string& host);

}  // namespace espvpn::io
