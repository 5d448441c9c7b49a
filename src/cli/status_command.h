// The status socket from the command line (docs/SERVICE.md): the session's side
// (--status-socket, --status-user/--status-group: the listener, the board, the
// server) and the client subcommands `espvpn status [--json]`, `espvpn disconnect`,
// `espvpn reconnect`.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "protocols/base/result.h"
#include "src/cli/options.h"
#include "src/session/status_server.h"

namespace espvpn::cli {

// Where a service's profile NAME serves its status: /run/espvpn/NAME.sock.
inline constexpr const char* kStatusDir = "/run/espvpn";
std::string status_socket_for(const std::string& name);

// The session's status interface: nullptr without --status-socket. Two steps, for the
// privilege split: open_status_service binds the listener (as root: /run/espvpn is root's),
// before the fork; start() runs the server's thread in the process that serves it (the
// session: threads do not survive a fork). The process that bound it removes the socket
// file when the object goes.
struct StatusService {
    explicit StatusService(status::Snapshot initial) : board(std::move(initial)) {}
    session::StatusBoard board;
    std::unique_ptr<session::StatusServer> server;
    std::string path;
    io::UniqueFd listener;          // until start()
    session::StatusAccess access;   // who may connect besides root and the serving process's user
    Status start();
    ~StatusService();  // the server stops; the socket file is removed (when it can be)
};
Result<std::unique_ptr<StatusService>> open_status_service(const ClientOptions& options);

// argv[1] is "status", "disconnect" or "reconnect".
bool is_status_subcommand(int argc, char** argv);
// Runs it; returns the exit code: 0 (status: connected; else: done), 1 error (no socket,
// refused, bad reply), 3 (status: reachable, not connected).
int run_status_subcommand(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace espvpn::cli
