#include "src/sandbox/seccomp_filter.h"

#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>

namespace espvpn::sandbox {
namespace {

// What a pipeline thread calls (strace of every pipeline under load, both directions, with
// rekeys, failures and the thread's exit), and what its libraries call for it: glibc's
// allocator and thread exit, GnuTLS's records (getrandom, getpid for its fork check),
// ASan's runtime in the sanitizer build (sched_yield, mmap, sigaltstack).
constexpr int kDatapathCalls[] = {
    // tun and socket I/O, batched and not
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
    SCMP_SYS(recvmmsg), SCMP_SYS(sendmmsg), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg),
    SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(getsockopt),
    // waiting and waking
    SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(futex), SCMP_SYS(sched_yield),
    SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(restart_syscall),
    // clocks (normally the vDSO; the syscalls where it is absent)
    SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(time),
    // memory for the allocator; executable mappings are refused below
    SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise),
    // identity, randomness, signals, the end of the thread
    SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getrandom),
    SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
    SCMP_SYS(close), SCMP_SYS(exit), SCMP_SYS(exit_group),
    // glibc's set*id (--setuid dropping root after set-up) makes every thread of the process
    // make the same call from a signal handler (SIGSETXID), and aborts if one fails: the
    // thread can only do what the process already may (as root, nothing new; after the
    // drop the kernel refuses a way back).
    SCMP_SYS(setuid), SCMP_SYS(setgid), SCMP_SYS(setreuid), SCMP_SYS(setregid),
    SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setgroups),
};

#if defined(__SANITIZE_ADDRESS__)
#define ESPVPN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ESPVPN_ASAN 1
#endif
#endif
#ifdef ESPVPN_ASAN
// The AddressSanitizer build only: its runtime checks whether memory is readable by
// writing it into a pipe (sanitizer_common's IsAccessibleMemoryRange), on a thread's
// exit among other times.
constexpr int kSanitizerCalls[] = {SCMP_SYS(pipe2), SCMP_SYS(pipe)};
#endif

// The whole session process (confine_session): what espvpn's unprivileged part makes, and
// what the programs it runs make (a filter is inherited across execve). Taken from strace
// -f of espvpn in gp_tunnel_{suites,script,hip,rekey,native_https}, ac_ocserv_{dtls_psk,
// cert_token,reconnect_tls_drop}, gp_login_* (portal, SAML hand-off, client certificate,
// tty prompt, soft token, HIP, cookie cache), pkcs11_gp_{softhsm,tpm2}, ac_csd_{wrapper,
// invoker}, gp_sso_{driven,tunnel};
// each group says who makes the calls. Kept though not seen there: equivalents of calls
// seen, with no more power (open/stat/lstat for older binaries, faccessat2, renameat2, dup3,
// pipe, select, epoll_pwait, timerfd_*, fork, tgkill for abort and pthread_kill, ...),
// accept/accept4 (the SSO callback and port-29786 listeners), landlock_* (restrict_files
// after this filter). The packet threads' list (kDatapathCalls) is added too: their own
// filter stacks on this one, and a call passes only when both allow it.
constexpr int kSessionCalls[] = {
    // files: config, CA/cert/key files, the cookie cache and state files (flock, fsync,
    // rename over), p11-kit's module configs and dlopen, NSS's /etc files, /proc/self
    SCMP_SYS(openat), SCMP_SYS(open), SCMP_SYS(close), SCMP_SYS(close_range), SCMP_SYS(read),
    SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64), SCMP_SYS(pwrite64),
    SCMP_SYS(lseek), SCMP_SYS(newfstatat), SCMP_SYS(fstat), SCMP_SYS(stat), SCMP_SYS(lstat),
    SCMP_SYS(statx), SCMP_SYS(statfs), SCMP_SYS(fstatfs), SCMP_SYS(access), SCMP_SYS(faccessat),
    SCMP_SYS(faccessat2), SCMP_SYS(readlink), SCMP_SYS(readlinkat), SCMP_SYS(getdents64),
    SCMP_SYS(fcntl), SCMP_SYS(flock), SCMP_SYS(ftruncate), SCMP_SYS(fsync), SCMP_SYS(fdatasync),
    SCMP_SYS(fchmod), SCMP_SYS(fchown), SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(unlink),
    SCMP_SYS(unlinkat), SCMP_SYS(rmdir), SCMP_SYS(rename), SCMP_SYS(renameat), SCMP_SYS(renameat2),
    SCMP_SYS(getcwd), SCMP_SYS(chdir), SCMP_SYS(fchdir), SCMP_SYS(umask), SCMP_SYS(dup), SCMP_SYS(dup2),
    SCMP_SYS(dup3), SCMP_SYS(pipe), SCMP_SYS(pipe2), SCMP_SYS(utimensat),
    SCMP_SYS(fadvise64),  // cat, in the wrappers
    SCMP_SYS(copy_file_range), SCMP_SYS(sendfile),  // cat and cp from a file: no more than read + write
    // memory: the allocator, dlopen of p11-kit modules (file-backed PROT_EXEC), Secret's
    // locked no-dump pages (mlock, madvise)
    SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect),
    SCMP_SYS(madvise), SCMP_SYS(mlock), SCMP_SYS(mlock2), SCMP_SYS(munlock), SCMP_SYS(msync),
    // threads (clone without namespace flags: the rule below), their scheduling (the packet
    // threads' priority), exit
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
    SCMP_SYS(set_tid_address), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
    SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_getscheduler), SCMP_SYS(sched_setscheduler),
    SCMP_SYS(sched_getparam), SCMP_SYS(sched_setparam), SCMP_SYS(sched_getattr), SCMP_SYS(sched_setattr),
    SCMP_SYS(getpriority), SCMP_SYS(setpriority), SCMP_SYS(exit), SCMP_SYS(exit_group),
    // processes: the CSD/HIP wrapper, the SSO browser, the session's helpers (fork or
    // posix_spawn, execve, wait with a pidfd); signals to its own children and threads
    SCMP_SYS(execve), SCMP_SYS(vfork), SCMP_SYS(fork), SCMP_SYS(wait4), SCMP_SYS(waitid),
    SCMP_SYS(pidfd_open), SCMP_SYS(pidfd_send_signal), SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(tkill),
    SCMP_SYS(setpgid), SCMP_SYS(getpgid), SCMP_SYS(getpgrp), SCMP_SYS(setsid), SCMP_SYS(getsid),
    SCMP_SYS(getpid), SCMP_SYS(getppid), SCMP_SYS(gettid),
    // signals, the session loop's signalfd and eventfd wake-ups
    SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigtimedwait),
    SCMP_SYS(rt_sigpending), SCMP_SYS(rt_sigsuspend), SCMP_SYS(sigaltstack), SCMP_SYS(signalfd4),
    SCMP_SYS(eventfd2), SCMP_SYS(restart_syscall),
    // waiting, clocks, timers
    SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(select), SCMP_SYS(pselect6), SCMP_SYS(epoll_create1),
    SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(nanosleep),
    SCMP_SYS(clock_nanosleep), SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday),
    SCMP_SYS(time), SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime), SCMP_SYS(timerfd_gettime),
    // sockets (socket and socketpair: families filtered below): TLS/DTLS/ESP, getaddrinfo
    // (DNS over UDP/TCP, nscd and systemd-resolved over Unix sockets), the SSO callback and
    // 29786 listeners, the system bus (logind sleep watch), rtnetlink route watch,
    // NETLINK_SOCK_DIAG (the external browser's peer check), syslog
    SCMP_SYS(connect), SCMP_SYS(bind), SCMP_SYS(listen), SCMP_SYS(accept), SCMP_SYS(accept4),
    SCMP_SYS(getsockname), SCMP_SYS(getpeername), SCMP_SYS(setsockopt), SCMP_SYS(getsockopt),
    SCMP_SYS(sendto), SCMP_SYS(recvfrom), SCMP_SYS(sendmsg), SCMP_SYS(recvmsg), SCMP_SYS(sendmmsg),
    SCMP_SYS(recvmmsg), SCMP_SYS(shutdown),
    // identity: who it is (NSS, the wrapper's environment); the set*id calls can only lower
    // (no capability, no_new_privs) and glibc makes every thread take part in one
    SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid), SCMP_SYS(getresuid),
    SCMP_SYS(getresgid), SCMP_SYS(getgroups), SCMP_SYS(setuid), SCMP_SYS(setgid), SCMP_SYS(setreuid),
    SCMP_SYS(setregid), SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setgroups), SCMP_SYS(setfsuid),
    SCMP_SYS(setfsgid),
    // the process itself: thread names, dumpable, pdeathsig (prctl), limits, the system's name
    // and load, randomness, the packet threads' own filter (seccomp: can only add), Landlock
    // (restrict_files: can only take away)
    SCMP_SYS(prctl), SCMP_SYS(arch_prctl), SCMP_SYS(prlimit64), SCMP_SYS(getrlimit), SCMP_SYS(uname),
    SCMP_SYS(sysinfo), SCMP_SYS(getrandom), SCMP_SYS(seccomp), SCMP_SYS(landlock_create_ruleset),
    SCMP_SYS(landlock_add_rule), SCMP_SYS(landlock_restrict_self), SCMP_SYS(getrusage), SCMP_SYS(times),
    SCMP_SYS(membarrier),
    // dropping what it does not hold before running a program as another user (capget,
    // capset: nothing to gain without capabilities and with no_new_privs)
    SCMP_SYS(capget), SCMP_SYS(capset),
    // the driven SSO browser, Chromium with --no-sandbox (gp_sso_driven): its profile
    // (creat, chmod, symlink: the singleton lock), file watches, shared memory between its
    // processes, memory protection keys. Chromium's own sandbox needs unshare, chroot and
    // ptrace (gp_sso_tunnel's browser): not allowed here, see confine_session's header.
    SCMP_SYS(creat), SCMP_SYS(chmod), SCMP_SYS(fchmodat), SCMP_SYS(symlink), SCMP_SYS(symlinkat),
    SCMP_SYS(inotify_init), SCMP_SYS(inotify_init1), SCMP_SYS(inotify_add_watch), SCMP_SYS(inotify_rm_watch),
    SCMP_SYS(memfd_create), SCMP_SYS(pkey_alloc), SCMP_SYS(pkey_free), SCMP_SYS(pkey_mprotect), SCMP_SYS(pause),
};

// clone: threads, fork, posix_spawn; never a new namespace (that is unshare by another name).
constexpr std::uint64_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                                          CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME;

// The socket families the session uses; anything else (AF_PACKET, AF_ALG, AF_VSOCK,
// AF_BLUETOOTH, ...) kills.
constexpr int kSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

struct Filter {
    scmp_filter_ctx ctx;
    explicit Filter(std::uint32_t default_action) : ctx(seccomp_init(default_action)) {}
    ~Filter() { seccomp_release(ctx); }
    Filter(const Filter&) = delete;
    Filter& operator=(const Filter&) = delete;
};

Status refused(const char* what, int rc) {
    return make_error(std::string("seccomp: ") + what + ": " + std::strerror(-rc));
}

Status build_datapath(scmp_filter_ctx ctx) {
    for (int call : kDatapathCalls)
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 0); rc < 0) return refused("allow", rc);
#ifdef ESPVPN_ASAN
    for (int call : kSanitizerCalls)
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 0); rc < 0) return refused("allow", rc);
#endif
    // mmap and mprotect, never with PROT_EXEC: no new code in a confined thread.
    for (int call : {SCMP_SYS(mmap), SCMP_SYS(mprotect)})
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
            rc < 0)
            return refused("allow mmap", rc);
    // glibc's syslog() reconnects by itself (socket + connect) when the log daemon went
    // away: that fails with EPERM here, the line is lost, the tunnel is not.
    for (int call : {SCMP_SYS(socket), SCMP_SYS(connect)})
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), call, 0); rc < 0) return refused("errno", rc);
    return {};
}


// The session's list: kSessionCalls and kDatapathCalls allowed, and these with their
// arguments checked (ints compared on their low 32 bits, as the kernel reads them).
Status build_session(scmp_filter_ctx ctx) {
    for (int call : kSessionCalls)
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 0); rc < 0) return refused("allow", rc);
#ifdef ESPVPN_ASAN
    // The AddressSanitizer build only: LeakSanitizer's check at exit stops the world from a
    // tracer thread (ptrace ATTACH / GETREGS / DETACH of the process's own threads, its task
    // list read with getdents). Without them the session hung at exit. PTRACE_TRACEME stays
    // forbidden (what sandbox_tests performs).
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(getdents), 0); rc < 0) return refused("allow", rc);
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ptrace), 1, SCMP_A0(SCMP_CMP_NE, 0 /* TRACEME */));
        rc < 0)
        return refused("allow ptrace", rc);
#endif
    for (int call : kDatapathCalls)
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 0); rc < 0 && rc != -EEXIST) return refused("allow", rc);
    for (int family : kSocketFamilies) {
        const scmp_datum_t f = static_cast<scmp_datum_t>(family);
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, f));
            rc < 0)
            return refused("allow socket", rc);
    }
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(AF_UNIX)));
        rc < 0)
        return refused("allow socketpair", rc);
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, kNamespaceFlags, 0));
        rc < 0)
        return refused("allow clone", rc);
    // clone3 passes its flags in memory a filter cannot read: ENOSYS, and glibc falls back
    // to clone (checked above).
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc < 0) return refused("clone3", rc);
    // ioctl: terminal modes for prompts, FIONREAD/FIONBIO, ...; TIOCSTI and TIOCLINUX (typing
    // into the user's terminal) fail with EPERM. The kernel reads the request as 32 bits, so
    // every test is on the low 32: allowed are requests whose upper 16 of those bits are 0
    // (TIOCSTI's are: libseccomp tests the two EPERM requests first, sandbox_tests checks it)
    // or have any bit set.
    for (unsigned long req : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)})
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(req)));
            rc < 0)
            return refused("errno ioctl", rc);
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffff0000u, 0));
        rc < 0)
        return refused("allow ioctl", rc);
    for (int bit = 16; bit < 32; ++bit)
        if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                      SCMP_A1(SCMP_CMP_MASKED_EQ, 1ULL << bit, 1ULL << bit));
            rc < 0)
            return refused("allow ioctl", rc);
    return {};
}

}  // namespace

bool filters_disabled() {
    const char* v = std::getenv("ESPVPN_SECCOMP");
    return v && std::strcmp(v, "0") == 0;
}

bool filters_log_only() {
    const char* v = std::getenv("ESPVPN_SECCOMP");
    return v && std::strcmp(v, "log") == 0;
}

const char* role_name(ThreadRole role) {
    switch (role) {
        case ThreadRole::datapath: return "datapath";
    }
    return "?";
}

Status confine_thread(ThreadRole role) {
    if (filters_disabled()) return {};
    // localtime_r reads /etc/localtime on its first use: done here, before open is gone.
    tzset();
    Filter f(filters_log_only() ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
    if (!f.ctx) return make_error("seccomp: cannot make a filter");
    // This thread only (no TSYNC); no_new_privs set by libseccomp for this thread.
    if (int rc = seccomp_attr_set(f.ctx, SCMP_FLTATR_CTL_NNP, 1); rc < 0) return refused("no_new_privs", rc);
    Status built;
    switch (role) {
        case ThreadRole::datapath: built = build_datapath(f.ctx); break;
    }
    if (!built) return built;
    if (int rc = seccomp_load(f.ctx); rc < 0) return refused("load", rc);
    return {};
}

Status confine_session() {
    if (filters_disabled()) return {};
    Filter f(filters_log_only() ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
    if (!f.ctx) return make_error("seccomp: cannot make a filter");
    if (int rc = seccomp_attr_set(f.ctx, SCMP_FLTATR_CTL_NNP, 1); rc < 0) return refused("no_new_privs", rc);
    // Every thread of the process, atomically; the kernel refuses (and nothing changes)
    // when a thread already has a filter this one does not descend from.
    if (int rc = seccomp_attr_set(f.ctx, SCMP_FLTATR_CTL_TSYNC, 1); rc < 0) return refused("tsync", rc);
    if (Status s = build_session(f.ctx); !s) return s;
    if (int rc = seccomp_load(f.ctx); rc < 0) return refused("load (every thread)", rc);
    return {};
}

}  // namespace espvpn::sandbox
