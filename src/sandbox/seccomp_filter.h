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

// The whole session process (the unprivileged part that talks to the server): no_new_privs
// and an allow-list on every thread at once (TSYNC), inherited by every thread it starts
// and every program it runs (the CSD/HIP wrapper, the SSO browser). A call outside the
// list kills the process (SIGSYS). Allowed: files, memory, threads, fork/execve/wait,
// signals, poll/epoll, clocks, timers, sockets of AF_UNIX/AF_INET/AF_INET6/AF_NETLINK
// only, ioctl (TIOCSTI/TIOCLINUX: EPERM), clone without namespace flags (clone3: ENOSYS,
// glibc falls back to clone), the set*id calls (they can only lower), prctl, seccomp and
// Landlock (they can only add restrictions), and the packet threads' calls. Not allowed,
// among everything else: ptrace, process_vm_readv/writev, mount/umount2/pivot_root/chroot
// and the new mount API, unshare/setns, bpf, perf_event_open, kexec_load/kexec_file_load,
// init_module/finit_module/delete_module, keyctl/add_key/request_key, userfaultfd,
// io_uring_*, mknod, socket() of any other family (AF_PACKET, AF_ALG, AF_VSOCK, ...).
// The SSO browser: Chromium run with --no-sandbox works under it (strace of gp_sso_driven);
// Chromium's own sandbox (user namespaces, chroot, ptrace for crash reports) does not, so
// a browser that keeps its sandbox must be started by a process outside this filter.
// Call it before the packet threads start: they stack their own filter (confine_thread)
// on this one, and TSYNC fails when a thread has a filter not descended from the caller's.
// ESPVPN_SECCOMP=0/log apply as for the threads.
Status confine_session();

// Whether ESPVPN_SECCOMP=0 turned the filters off, or =log made them log only.
bool filters_disabled();
bool filters_log_only();

// "datapath", for messages.
const char* role_name(ThreadRole role);

}  // namespace espvpn::sandbox
