// openconnect's "Process control" options for a tunnel command:
//   -b/--background  the command forks once it has logged in, before the tunnel is
//                    set up; the parent waits and exits 0 when the child reports the
//                    tunnel up (or with the child's exit status if it never does).
//                    So VPNPID, the pid file and every script see the daemon's PID.
//   --pid-file FILE  opened before anything else (while privileged); holds the PID of
//                    the process that runs the tunnel (the daemon with -b); removed on exit.
//   -U/--setuid USER looked up at start; privileges dropped once the tun, its host
//                    configuration and the sockets exist (see drop_privileges).
//
// Usage in a protocol command (after login, before the tunnel):
//   auto pc = ProcessControl::prepare(options);     // early: bad user/pid file → exit 1
//   pc->background();                                // -b: returns only in the child
//   tunnel_options.after_setup = [&] { return pc->drop_privileges(); };
//   tunnel_options.on_connected = [&] { pc->tunnel_up(); };
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "protocols/base/result.h"
#include "src/cli/options.h"

namespace espvpn::cli {

// An account to run as: resolved once, so a typo fails before the login.
struct RunAsUser {
    std::string name;
    uid_t uid = 0;
    gid_t gid = 0;
    static Result<RunAsUser> lookup(const std::string& name);
    // initgroups + setgid + setuid (all threads), then checks root cannot be regained.
    Status drop() const;
};

// Who runs the --csd-wrapper (CSD host scan, HIP report: it handles the server's data, so
// never root unless asked): --csd-user when given; else, when espvpn is root, the -U user,
// the user who invoked espvpn through sudo/pkexec (SUDO_UID/PKEXEC_UID), or nobody (said
// in the log). "" when there is no wrapper or espvpn is not root (it runs as espvpn's user).
std::string csd_run_as(const ClientOptions& options);

class ProcessControl {
public:
    static Result<ProcessControl> prepare(const ClientOptions& options);
    ProcessControl(ProcessControl&&) noexcept;
    ProcessControl& operator=(ProcessControl&&) = delete;
    ProcessControl(const ProcessControl&) = delete;
    ~ProcessControl();  // removes the pid file (if it still can)

    // -b: fork. The parent waits for tunnel_up() or the child's exit and leaves with
    // _exit (never running destructors that would close the child's TLS session).
    // Must be called before any thread starts. Without -b: nothing.
    void background();

    // What stays after the drop, for reconnects and the end of the tunnel: the open tun
    // and UDP socket (buffer sizes set while privileged), the TLS credentials already
    // loaded, the DNS restore handle (src/host/dns.h); new HTTPS connections and
    // a new getconfig need no privilege. Scripts run after this run as USER, as with
    // openconnect. Without --setuid: nothing.
    Status drop_privileges();

    // The tunnel carries traffic: release the waiting parent (-b) and detach from
    // the terminal's session. Safe to call more than once.
    void tunnel_up();

    // The privilege split (privilege_split.h): the broker keeps the pid file and lets the
    // session release the waiting parent; the session leaves the pid file to the broker.
    void leave_up_to_session();
    void forget_pid_file();

private:
    ProcessControl() = default;
    void write_pid();

    std::optional<RunAsUser> run_as_;
    bool background_ = false;
    bool backgrounded_ = false;  // background() has run (it forks once)
    std::string pid_file_;
    int pid_fd_ = -1;
    int up_fd_ = -1;   // child end of the pipe the parent waits on
};

}  // namespace espvpn::cli
