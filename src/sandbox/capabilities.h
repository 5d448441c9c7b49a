// Capabilities of the privileged part (the broker): it keeps the few it needs and loses
// every other one for good, for itself and for any program it runs (the vpnc-script).
//
// Usage, once, before the broker reads its first request:
//   if (Status s = sandbox::keep_only_capabilities({CAP_NET_ADMIN, CAP_NET_BIND_SERVICE},
//                                                  sandbox::KeepSetpcap::yes); !s) ...
//   ... open the DNS forwarder's port ...
//   sandbox::drop_capability(CAP_NET_BIND_SERVICE);  // and out of the bounding set
//   sandbox::drop_capability(CAP_SETPCAP);           // the bounding set is CAP_NET_ADMIN alone
//
// Not subject to ESPVPN_SECCOMP: a capability set is not a filter to debug.
#pragma once

#include <initializer_list>

#include "protocols/base/result.h"

namespace espvpn::sandbox {

// Whether CAP_SETPCAP stays in the permitted and effective sets (never the inheritable or
// ambient ones: no program run gets it), so that drop_capability can still take a
// capability out of the bounding set; drop_capability(CAP_SETPCAP) ends that.
enum class KeepSetpcap { no, yes };

// Reduces the calling process (every thread: call it while the process has one thread, or
// before starting the others, since capabilities are per thread) to `caps` (CAP_* numbers
// of <linux/capability.h>):
//   - bounding set = caps (PR_CAPBSET_DROP of every other one);
//   - permitted = effective = inheritable = ambient = caps, so an exec'd program (the
//     vpnc-script) runs with exactly `caps`, whether or not its uid is 0;
//   - securebits SECBIT_NOROOT (locked): uid 0 gains nothing at execve beyond the ambient
//     set; SECBIT_KEEP_CAPS off (locked); SECBIT_NO_CAP_AMBIENT_RAISE (locked);
//   - no_new_privs: no setuid or file-capability program gives anything back.
// Needs CAP_SETPCAP on entry (root), which it gives up itself unless `setpcap` is yes. An
// Error says which step the kernel refused; the process may then hold more than `caps` and
// should stop.
Status keep_only_capabilities(std::initializer_list<int> caps, KeepSetpcap setpcap = KeepSetpcap::no);

// Gives up `cap` for good: out of the effective, permitted, inheritable and ambient sets
// (nothing can add it back: the permitted set never grows without an execve, and with
// no_new_privs an execve never grows it), and out of the bounding set too while the process
// still holds CAP_SETPCAP (KeepSetpcap::yes; dropping CAP_SETPCAP itself takes it out of the
// bounding set first). Without CAP_SETPCAP it stays in the bounding set, which under
// no_new_privs grants nothing. Dropping a capability the process does not hold succeeds.
Status drop_capability(int cap);

}  // namespace espvpn::sandbox
