// The privileged broker (issue 41): the process espvpn started as (its PID is the one the
// shell, NetworkManager, the pid file and VPNPID see). After the fork it holds only
// CAP_NET_ADMIN (and CAP_NET_BIND_SERVICE until the domain split's DNS forwarder socket is
// open), never reads a byte from the network, and serves the unprivileged session process:
// typed requests (protocols/broker) on the request socket, each checked against the
// broker's state, acted on with a TunnelHost, answered. Signals it receives are forwarded
// to the session as events. When the session ends, the host is torn down (routes, DNS, kill
// switch restored) and the broker leaves with the session's exit status.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "src/host/tunnel_host.h"
#include "src/io/unique_fd.h"

namespace espvpn::host {

struct BrokerOptions {
    TunnelHostOptions host;
    bool detach_when_up = false;  // -b: leave the terminal's session once the tun is up
    // The state files root named before the split, which the session may not be able to
    // write itself: these exact paths, and names [A-Za-z0-9._-]{1,128} directly in state_dir.
    std::vector<std::string> state_files;
    std::string state_dir;
};

// How the session ended.
struct SessionEnd {
    bool exited = false;
    int code = 0;    // exited: the exit status
    int signal = 0;  // else: the signal that killed it
};

// The signals the broker takes over (block them before the fork: none is lost).
void block_broker_signals(sigset_t* old);

// Serves until the session process ends; the host is down when it returns.
SessionEnd run_broker(io::UniqueFd requests, io::UniqueFd events, pid_t session, const BrokerOptions& options);

// Is `path` a state file the broker may read or write for the session?
bool state_path_allowed(const BrokerOptions& options, const std::string& path);

}  // namespace espvpn::host
