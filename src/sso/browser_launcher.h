// The user's own browser, started from outside the session process's seccomp filter
// (docs/SECURITY.md "Who holds what"). A browser that keeps its own sandbox (Chromium's,
// Firefox's: user namespaces) cannot start under confine_session's filter, so the session
// process forks this launcher before it installs the filter: the same user, no capability,
// no_new_privs, off the terminal (setsid), named espvpn-browser. It does one thing: for each
// message on its socket it starts the browser program fixed when it was forked (xdg-open, or
// --external-browser=PROGRAM) with that one argument, as start_as_user does, and answers
// whether it started. It accepts only what check_launch_target allows, and reads nothing else
// from anyone: no byte from the network reaches it except that URL. It ends when the session
// closes its end (or dies: PR_SET_PDEATHSIG).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "protocols/base/result.h"

namespace espvpn::sso {

// The longest argument the launcher passes on (a SAML redirect URL carries its request:
// a few KiB in practice).
constexpr std::size_t kMaxLaunchTarget = 32 * 1024;

// What the launcher opens: an http:// or https:// URL naming a host, or the identity
// provider's form page espvpn wrote for the browser (an absolute path
// DIR/espvpn-sso-XXXXXX/login.html, external_browser.cpp), at most kMaxLaunchTarget bytes of
// printable ASCII (no space, no control character). Anything else (a file:, javascript: or
// other URL, a path to another file, an option-like word) is refused with the reason.
Status check_launch_target(std::string_view target);

// Forks the launcher; call while this process has one thread, before its seccomp filter.
// `program` is the browser command (split on spaces, the target appended); `in_child` runs
// first in the launcher (e.g. to wipe the secrets it inherited). From then on
// launch_browser() goes through it. Errors: socketpair or fork failed.
Status start_browser_launcher(const std::string& program, const std::function<void()>& in_child);

// Whether this process has a launcher (start_browser_launcher succeeded).
bool has_browser_launcher();

// Closes this process's end: the launcher ends.
void stop_browser_launcher();

// Asks the launcher to open `target` (checked here too); waits for its answer (at most 30 s).
// Errors: refused, the program could not be started, the launcher has gone.
Status launch_browser(const std::string& target);

}  // namespace espvpn::sso
