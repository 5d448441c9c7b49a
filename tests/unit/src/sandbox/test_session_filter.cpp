// The session process's filter (confine_session) as the kernel applies it: each case forks,
// confines the child, and makes one call an attacker in the session would make; the child
// must die by SIGSYS. The calls the session makes (threads, a program it runs, names,
// sockets of its families, the packet threads' own filter on top) must still work.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "src/sandbox/seccomp_filter.h"
#include "tests/unit/src/sandbox/child.h"

using espvpn::sandbox::confine_session;
using espvpn::sandbox::confine_thread;
using espvpn::sandbox::ThreadRole;
using namespace espvpn::sandbox::test;

namespace {

Ended confined(const std::function<int()>& body) {
    return in_child([&] {
        if (!confine_session()) return 100;
        return body();
    });
}

void check_killed(const std::string& what, const std::function<long()>& call) {
    CAPTURE(what);
    const Ended e = confined([&] {
        (void)call();
        return 0;  // the call came back: not forbidden
    });
    CHECK_FALSE(e.exited);
    CHECK(e.signal == SIGSYS);
}

}  // namespace

TEST_CASE("session filter: what an attacker in the session would call is killed with SIGSYS") {
    unsetenv("ESPVPN_SECCOMP");
    check_killed("ptrace", [] { return syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0); });
    check_killed("process_vm_readv", [] {
        char buf[8];
        iovec l{buf, sizeof buf}, r{buf, sizeof buf};
        return syscall(SYS_process_vm_readv, getppid(), &l, 1, &r, 1, 0);
    });
    check_killed("process_vm_writev", [] {
        char buf[8] = {};
        iovec l{buf, sizeof buf}, r{buf, sizeof buf};
        return syscall(SYS_process_vm_writev, getppid(), &l, 1, &r, 1, 0);
    });
    check_killed("mount", [] { return syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, nullptr); });
    check_killed("umount2", [] { return syscall(SYS_umount2, "/mnt", 0); });
    check_killed("pivot_root", [] { return syscall(SYS_pivot_root, "/", "/"); });
    check_killed("chroot", [] { return syscall(SYS_chroot, "/"); });
    check_killed("unshare", [] { return syscall(SYS_unshare, CLONE_NEWUSER); });
    check_killed("setns", [] { return syscall(SYS_setns, -1, 0); });
    check_killed("clone into a new user namespace", [] {
        const long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (r == 0) _exit(0);
        return r;
    });
    check_killed("bpf", [] { return syscall(SYS_bpf, 0, nullptr, 0); });
    check_killed("perf_event_open", [] { return syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); });
    check_killed("kexec_load", [] { return syscall(SYS_kexec_load, 0, 0, nullptr, 0); });
    check_killed("kexec_file_load", [] { return syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, 0); });
    check_killed("init_module", [] { return syscall(SYS_init_module, nullptr, 0, ""); });
    check_killed("finit_module", [] { return syscall(SYS_finit_module, -1, "", 0); });
    check_killed("delete_module", [] { return syscall(SYS_delete_module, "espvpn-none", 0); });
    check_killed("keyctl", [] { return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -1, 0); });
    check_killed("add_key", [] { return syscall(SYS_add_key, "user", "x", "y", 1, -2); });
    check_killed("request_key", [] { return syscall(SYS_request_key, "user", "x", nullptr, 0); });
    check_killed("userfaultfd", [] { return syscall(SYS_userfaultfd, 0); });
    check_killed("io_uring_setup", [] { return syscall(SYS_io_uring_setup, 1, nullptr); });
    check_killed("mknod", [] { return syscall(SYS_mknodat, AT_FDCWD, "/tmp/espvpn-none", S_IFIFO | 0600, 0); });
    check_killed("socket(AF_PACKET)", [] { return socket(AF_PACKET, SOCK_RAW, 0); });
    check_killed("socket(AF_ALG)", [] { return socket(AF_ALG, SOCK_SEQPACKET, 0); });
    check_killed("socketpair(AF_INET)", [] {
        int sv[2];
        return socketpair(AF_INET, SOCK_STREAM, 0, sv);
    });
}

TEST_CASE("session filter: typing into the terminal (TIOCSTI, TIOCLINUX) fails with EPERM") {
    unsetenv("ESPVPN_SECCOMP");
    // On a descriptor that is no terminal: unfiltered, the kernel says ENOTTY.
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    const Ended e = confined([&] {
        char c = 'x';
        for (unsigned long req : {static_cast<unsigned long>(TIOCSTI), 0x100000000UL | TIOCSTI,  // the kernel reads 32 bits
                                  static_cast<unsigned long>(TIOCLINUX)}) {
            errno = 0;
            if (syscall(SYS_ioctl, sv[0], req, &c) != -1 || errno != EPERM) return 10;
        }
        // Other requests reach the kernel: low, with direction/size bits, sign-extended.
        for (unsigned long req : {static_cast<unsigned long>(TCGETS), static_cast<unsigned long>(TIOCGWINSZ),
                                  static_cast<unsigned long>(0x80045430UL), 0xffffffff80045430UL, 0x5413UL + 0x10000}) {
            errno = 0;
            if (syscall(SYS_ioctl, sv[0], req, &c) != -1 || errno != ENOTTY) return 11;
        }
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
    close(sv[0]);
    close(sv[1]);
}

TEST_CASE("session filter: the calls the session makes still work") {
    unsetenv("ESPVPN_SECCOMP");
    const Ended e = confined([] {
        // A thread (glibc: clone3 refused with ENOSYS, then clone).
        bool ran = false;
        std::thread([&] { ran = true; }).join();
        if (!ran) return 10;
        // Names from /etc/hosts (NSS, getaddrinfo).
        addrinfo* ai = nullptr;
        if (getaddrinfo("localhost", "443", nullptr, &ai) != 0) return 11;
        freeaddrinfo(ai);
        // The families it uses.
        for (int family : {AF_INET, AF_INET6, AF_UNIX}) {
            const int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            if (s < 0 && errno != EAFNOSUPPORT) return 12;
            if (s >= 0) close(s);
        }
        const int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (nl < 0) return 13;
        close(nl);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 14;
        int pending = -1;
        if (ioctl(sv[0], FIONREAD, &pending) != 0 || pending != 0) return 15;
        // A program it runs (a CSD wrapper): a shell, which inherits the filter.
        const char* const argv[] = {"/bin/sh", "-c", "cat /proc/self/status", nullptr};
        const std::string st = run_output(argv);
        if (status_field(st, "Seccomp") != "2" || status_field(st, "NoNewPrivs") != "1") return 16;
        // A wrapper's cat from a file into a file (coreutils: copy_file_range).
        char dir[] = "/tmp/espvpn-session-filter.XXXXXX";
        if (!mkdtemp(dir)) return 18;
        const std::string copy = std::string("echo x >") + dir + "/a && cat " + dir + "/a >" + dir + "/b && cat " +
                                 dir + "/b; rm -rf " + dir;
        const char* const cat_argv[] = {"/bin/sh", "-c", copy.c_str(), nullptr};
        if (run_output(cat_argv) != "x\n") return 19;
        // A packet thread stacks its own filter and works under both.
        bool pipeline = false;
        std::thread([&] {
            if (!confine_thread(ThreadRole::datapath)) return;
            char b = 1;
            pipeline = write(sv[0], &b, 1) == 1 && read(sv[1], &b, 1) == 1;
        }).join();
        if (!pipeline) return 17;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("session filter: threads started before it are confined too (TSYNC)") {
    unsetenv("ESPVPN_SECCOMP");
    const Ended e = in_child([] {
        int go[2];
        if (pipe(go) != 0) return 101;
        std::thread early([&] {
            char c;
            if (read(go[0], &c, 1) != 1) _exit(102);
            syscall(SYS_ptrace, 0, 0, 0, 0);  // on a thread that existed before the filter
            _exit(0);
        });
        if (!confine_session()) _exit(100);
        char c = 1;
        (void)!write(go[1], &c, 1);
        early.join();
        return 0;
    });
    CHECK_FALSE(e.exited);
    CHECK(e.signal == SIGSYS);
}

TEST_CASE("session filter: ESPVPN_SECCOMP=log lets a forbidden call through, =0 installs nothing") {
    for (const char* mode : {"log", "0"}) {
        CAPTURE(mode);
        setenv("ESPVPN_SECCOMP", mode, 1);
        const Ended e = confined([] {
            errno = 0;
            const long r = syscall(SYS_bpf, -1, nullptr, 0);
            return r == -1 && errno != 0 ? 0 : 1;
        });
        unsetenv("ESPVPN_SECCOMP");
        CHECK(e.exited);
        CHECK(e.code == 0);
    }
}
