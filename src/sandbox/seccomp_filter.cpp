#include "src/sandbox/seccomp_filter.h"

#include <seccomp.h>
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

}  // namespace espvpn::sandbox
