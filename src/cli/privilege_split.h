// The privilege split (issue 41, docs/SECURITY.md "Who holds what"): espvpn started as root
// forks once, before the login. The parent stays the broker (src/host/broker.h: uid 0 with
// CAP_NET_ADMIN only, it parses no network input); the child becomes the session process: it
// switches to the session user (-U USER; else the CSD/HIP wrapper's user (csd_run_as); else
// the sudo/pkexec invoker; else the system user `espvpn`; else nobody) with no capability and no_new_privs, and does everything that
// touches the server (login, tunnel, datapath), asking the broker for the host side.
#pragma once

#include <memory>
#include <variant>

#include "protocols/base/result.h"
#include "src/cli/options.h"
#include "src/cli/process_control.h"
#include "src/host/broker.h"
#include "src/host/broker_client.h"

namespace espvpn::cli {

// The session process's link to its broker (null: no split, this process does it all).
struct SessionSide {
    std::shared_ptr<host::BrokerChannel> broker;
};

// Not root: no split (SessionSide with no broker). Root: forks; returns in the session
// process (SessionSide with the broker channel), or in the broker once the session has
// ended, with the exit code to leave with.
Result<std::variant<int, SessionSide>> split_privileges(ClientOptions& options, ProcessControl& process,
                                                        host::BrokerOptions broker_options);

// Whether the session may start the user's own browser for a SAML login (--external-browser,
// or xdg-open with a display): then it forks a browser launcher (src/sso/browser_launcher.h)
// before confine_session's seccomp filter, which a browser keeping its own sandbox cannot
// start under; the session itself is filtered all the same.
bool user_browser_may_start(const ClientOptions& options);

// Landlock for the session process (sandbox::restrict_files): only when nothing it may run
// needs files of its own (no --sso-browser, --external-browser or display for xdg-open, no
// PKCS#11 URI): the system read-only, the files given read-only, the directories of an HOTP
// file and --stats-json, the portal cookie cache (`state_dir`, when the session user may use
// it), the SSO callback's and the temporary directory read-write; a CSD/HIP wrapper read and
// executed (with /tmp read-write). ESPVPN_LANDLOCK=0 skips it.
bool landlock_fits(const ClientOptions& options);
Status restrict_session_files(const ClientOptions& options, const RunAsUser& user, const std::string& state_dir);

// Who the session process runs as (see above); a line in the log when it is nobody.
Result<RunAsUser> session_user(const ClientOptions& options);

}  // namespace espvpn::cli
