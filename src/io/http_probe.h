// The captive-portal probe's request (protocols/captive): one plain-HTTP GET, no redirect
// followed, no cookie, bounded in time (connect and answer within `timeout`) and in size
// (captive::kMaxAnswerBytes: the rest of a longer answer is never read). Runs in the
// unprivileged session process; the answer is the network's, parsed by the sans-IO code.
#pragma once

#include <chrono>

#include "protocols/base/result.h"
#include "protocols/captive/captive_probe.h"

namespace espvpn::io {

// `cancel_fd` (-1: none): readable ends every wait at once.
Result<captive::ProbeAnswer> http_probe(const captive::HttpUrl& url, std::chrono::milliseconds timeout,
                                        int cancel_fd = -1);

}  // namespace espvpn::io
