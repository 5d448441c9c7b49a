// The datapath filter as the kernel applies it: each case forks, confines the child's only
// thread, makes one call and reports how the child ended. A forbidden call must end it by
// SIGSYS; the calls a pipeline makes must work.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "src/sandbox/seccomp_filter.h"

using espvpn::sandbox::confine_thread;
using espvpn::sandbox::ThreadRole;

namespace {

struct Ended {
    bool exited = false;
    int code = -1;
    int signal = 0;
};

// Runs `body` in a confined child; the child exits with body's value.
Ended run_confined(const std::function<int()>& body) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (!confine_thread(ThreadRole::datapath)) _exit(100);
        _exit(body());
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    Ended e;
    if (WIFEXITED(status)) {
        e.exited = true;
        e.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
    }
    return e;
}

void check_killed(const char* what, const std::function<int()>& body) {
    CAPTURE(what);
    const Ended e = run_confined(body);
    CHECK_FALSE(e.exited);
    CHECK(e.signal == SIGSYS);
}

}  // namespace

TEST_CASE("datapath filter: the calls a pipeline makes still work") {
    unsetenv("ESPVPN_SECCOMP");
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_DGRAM, 0, fds) == 0);
    const Ended ok = run_confined([&] {
        const char msg[] = "packet";
        if (write(fds[0], msg, sizeof msg) != static_cast<ssize_t>(sizeof msg)) return 2;
        char buf[16];
        if (read(fds[1], buf, sizeof buf) != static_cast<ssize_t>(sizeof msg)) return 3;
        mmsghdr m{};
        iovec iov{buf, sizeof buf};
        m.msg_hdr.msg_iov = &iov;
        m.msg_hdr.msg_iovlen = 1;
        if (sendmmsg(fds[0], &m, 1, 0) != 1) return 4;
        if (recvmmsg(fds[1], &m, 1, MSG_DONTWAIT, nullptr) != 1) return 5;
        // The allocator's memory, without PROT_EXEC.
        void* page = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) return 6;
        std::memset(page, 1, 1 << 20);
        if (munmap(page, 1 << 20) != 0) return 7;
        std::string grow(1 << 22, 'x');  // malloc through mmap/brk
        // glibc's syslog() reconnecting: refused with EPERM, not killed.
        errno = 0;
        if (socket(AF_UNIX, SOCK_DGRAM, 0) != -1 || errno != EPERM) return 8;
        return grow.size() == (1u << 22) ? 0 : 9;
    });
    CHECK(ok.exited);
    CHECK(ok.code == 0);
    close(fds[0]);
    close(fds[1]);
}

TEST_CASE("datapath filter: what an attacker in a pipeline thread would call is killed with SIGSYS") {
    unsetenv("ESPVPN_SECCOMP");
    check_killed("open a file", [] { return open("/etc/passwd", O_RDONLY) >= 0 ? 0 : 1; });
    check_killed("execve a shell", [] {
        char* argv[] = {const_cast<char*>("/bin/sh"), nullptr};
        execve("/bin/sh", argv, environ);
        return 1;
    });
    check_killed("fork a process", [] { return fork() >= 0 ? 0 : 1; });
    check_killed("executable memory", [] {
        void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? 1 : 0;
    });
    check_killed("make memory executable", [] {
        static char page[8192] __attribute__((aligned(4096)));
        return mprotect(page, 4096, PROT_READ | PROT_EXEC);
    });
    check_killed("ptrace", [] { return static_cast<int>(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)); });
    check_killed("kill", [] { return kill(1, 0); });
    check_killed("prctl", [] { return prctl(PR_SET_DUMPABLE, 1); });
#if !defined(__SANITIZE_ADDRESS__)  // ASan's runtime needs pipes on the thread (seccomp_filter.cpp)
    check_killed("a new pipe", [] {
        int p[2];
        return pipe(p);
    });
#endif
}

TEST_CASE("datapath filter: only the calling thread is confined") {
    unsetenv("ESPVPN_SECCOMP");
    const Ended e = run_confined([] { return 0; });
    CHECK(e.exited);
    // A confined thread in this process, then an open() on this thread: still allowed.
    bool confined_ok = false;
    std::thread t([&] { confined_ok = static_cast<bool>(confine_thread(ThreadRole::datapath)); });
    t.join();
    CHECK(confined_ok);
    const int fd = open("/proc/self/status", O_RDONLY);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
}

TEST_CASE("datapath filter: --setuid's drop of root runs on a confined thread too") {
    // glibc's setgid/setuid make every thread make the call (SIGSETXID) and abort if one
    // fails: a confined thread must take part, and the process lives on as nobody.
    unsetenv("ESPVPN_SECCOMP");
    if (geteuid() != 0) return;  // the drop needs root
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int ready[2], dropped[2];
        if (pipe(ready) != 0 || pipe(dropped) != 0) _exit(101);
        std::thread confined([&] {
            if (!confine_thread(ThreadRole::datapath)) _exit(100);
            char c = 1;
            (void)!write(ready[1], &c, 1);
            (void)!read(dropped[0], &c, 1);  // confined and alive until the main thread has dropped root
        });
        char c = 1;
        if (read(ready[0], &c, 1) != 1) _exit(102);
        if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(103);
        if (setuid(0) == 0) _exit(104);  // no way back, and no SIGSYS for trying
        (void)!write(dropped[1], &c, 1);
        confined.join();
        _exit(getuid() == 65534 ? 0 : 105);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    if (WIFEXITED(status)) CHECK(WEXITSTATUS(status) == 0);
    if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == 0);  // shows which signal
}

TEST_CASE("ESPVPN_SECCOMP=0 installs no filter") {
    setenv("ESPVPN_SECCOMP", "0", 1);
    const Ended e = run_confined([] { return open("/proc/self/status", O_RDONLY) >= 0 ? 0 : 1; });
    unsetenv("ESPVPN_SECCOMP");
    CHECK(e.exited);
    CHECK(e.code == 0);
}
