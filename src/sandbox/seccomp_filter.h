// Seccomp allow-lists, installed on the calling thread only (no TSYNC): a thread that
// handles packets from the network gives up every system call it does not make, so a
// memory bug in it cannot open a file, a socket or a process. A call outside the list
// kills the whole process with SIGSYS (SECCOMP_RET_KILL_PROCESS: nothing half-works);
// the kernel's audit log names the call.
//
// Usage, first thing on the new thread:
//   if (Status s = sandbox::confine_thread(sandbox::ThreadRole::datapath); !s) ...
//
// The thread also gets no_new_privs (required for an unprivileged filter); other threads
// of the process keep theirs. ESPVPN_SECCOMP=0 in the environment skips the filters, and
// ESPVPN_SECCOMP=log lets a forbidden call through with a line in the kernel's log (to
// tell a SIGSYS from another crash, and to see which call it was).
#pragma once

#include <string>

#include "protocols/base/result.h"

namespace espvpn::sandbox {

enum class ThreadRole {
    // The tx and rx threads of a pipeline (src/datapath): tun and socket reads and writes
    // in batches, poll, futex, clocks, memory for the allocator, getrandom for TLS records.
    datapath,
};

// Installs the role's filter on the calling thread. An Error when the kernel refused it
// (the thread then runs unconfined: the caller decides whether that may go on).
Status confine_thread(ThreadRole role);

// Whether ESPVPN_SECCOMP=0 turned the filters off, or =log made them log only.
bool filters_disabled();
bool filters_log_only();

// "datapath", for messages.
const char* role_name(ThreadRole role);

}  // namespace espvpn::sandbox
