// restrict_files as the kernel applies it: each case forks, restricts the child, and tries
// a write outside the allowed directories (EACCES, even as root), the reads and writes the
// session needs (its given files, its runtime directory, the system, /dev/null), and the
// same through a program it runs.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "src/sandbox/landlock.h"
#include "src/sandbox/seccomp_filter.h"
#include "tests/unit/src/sandbox/child.h"

using espvpn::sandbox::FileRules;
using espvpn::sandbox::landlock_abi;
using espvpn::sandbox::landlock_description;
using espvpn::sandbox::restrict_files;
using namespace espvpn::sandbox::test;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/espvpn-landlock.XXXXXX";
        if (mkdtemp(t)) path = t;
    }
    ~TempDir() {
        const std::string cmd = "rm -rf '" + path + "'";
        (void)!std::system(cmd.c_str());
    }
};

bool write_file(const std::string& path, int flags = O_CREAT | O_WRONLY | O_TRUNC) {
    const int fd = open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return false;
    const bool ok = write(fd, "x", 1) == 1;
    close(fd);
    return ok;
}

}  // namespace

TEST_CASE("restrict_files: writes only beneath the runtime directory, reads of the given files and the system") {
    unsetenv("ESPVPN_LANDLOCK");
    if (landlock_abi() == 0) {
        MESSAGE("skipped: the kernel has no Landlock");
        return;
    }
    TempDir runtime, given, outside;
    REQUIRE(!runtime.path.empty());
    REQUIRE(!given.path.empty());
    REQUIRE(!outside.path.empty());
    const std::string ca = given.path + "/ca.pem";
    REQUIRE(write_file(ca));
    const std::string other = given.path + "/not-given.pem";
    REQUIRE(write_file(other));

    const Ended e = in_child([&] {
        // Possible before (so the refusals below are Landlock's).
        if (!write_file(outside.path + "/before")) return 10;
        auto abi = restrict_files({.read_only = {ca}, .read_write = {runtime.path}});
        if (!abi || *abi != landlock_abi()) return 11;
        errno = 0;
        if (write_file(outside.path + "/after") || errno != EACCES) return 12;       // outside: refused
        if (write_file(outside.path + "/before") || errno != EACCES) return 13;      // an existing file too
        if (mkdir((outside.path + "/d").c_str(), 0700) == 0 || errno != EACCES) return 14;
        if (write_file(ca, O_WRONLY) || errno != EACCES) return 15;                  // given read-only
        if (open(other.c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES) return 16;  // not given
        const int r = open(ca.c_str(), O_RDONLY | O_CLOEXEC);                        // given: readable
        if (r < 0) return 17;
        close(r);
        if (!write_file(runtime.path + "/cookie")) return 18;                        // runtime: read/write
        if (mkdir((runtime.path + "/sso").c_str(), 0700) != 0) return 19;
        if (rename((runtime.path + "/cookie").c_str(), (runtime.path + "/sso/cookie").c_str()) != 0) return 20;
        const int h = open("/etc/hosts", O_RDONLY | O_CLOEXEC);                      // the system: readable
        if (h < 0) return 21;
        close(h);
        if (write_file("/etc/espvpn-landlock-test") || errno != EACCES) return 22;   // but not writable, even as root
        if (!write_file("/dev/null")) return 23;
        // A program it runs is restricted the same way, and /usr is executable.
        const std::string sh = "echo x 2>/dev/null >'" + outside.path + "/from-shell'; cat '" + ca + "'";
        const char* const argv[] = {"/bin/sh", "-c", sh.c_str(), nullptr};
        if (run_output(argv) != "x") return 24;
        if (access((outside.path + "/from-shell").c_str(), F_OK) == 0) return 25;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("restrict_files: a program given (a CSD/HIP wrapper) runs; the same program elsewhere does not") {
    unsetenv("ESPVPN_LANDLOCK");
    if (landlock_abi() == 0) {
        MESSAGE("skipped: the kernel has no Landlock");
        return;
    }
    TempDir runtime, programs;
    const std::string script = "#!/bin/sh\nprintf ran\n";
    const std::string wrapper = programs.path + "/wrapper", other = programs.path + "/other";
    for (const std::string& p : {wrapper, other}) {
        const int fd = open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size()));
        close(fd);
    }
    const Ended e = in_child([&] {
        if (!restrict_files({.read_only = {}, .read_write = {runtime.path}, .executable = {wrapper}})) return 10;
        const char* const given[] = {wrapper.c_str(), nullptr};
        if (run_output(given) != "ran") return 11;
        // Not given: neither executed nor read.
        const Ended other_run = in_child([&] {
            const char* const argv[] = {other.c_str(), nullptr};
            execv(argv[0], const_cast<char* const*>(argv));
            return errno;
        });
        if (!other_run.exited || other_run.code != EACCES) return 12;
        if (open(other.c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES) return 13;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("restrict_files: no signals to processes outside (ABI 6)") {
    unsetenv("ESPVPN_LANDLOCK");
    if (landlock_abi() < 6) {
        MESSAGE("skipped: Landlock ABI < 6");
        return;
    }
    TempDir runtime;
    const pid_t parent = getpid();
    const Ended e = in_child([&] {
        if (kill(parent, 0) != 0) return 10;
        if (!restrict_files({.read_only = {}, .read_write = {runtime.path}})) return 11;
        if (kill(parent, 0) == 0 || errno != EPERM) return 12;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("restrict_files: a missing given file is an error naming it; ESPVPN_LANDLOCK=0 applies nothing") {
    const Ended e = in_child([] {
        unsetenv("ESPVPN_LANDLOCK");
        if (landlock_abi() > 0) {
            auto r = restrict_files({.read_only = {"/nonexistent/ca.pem"}, .read_write = {}});
            if (r || r.error().message.find("/nonexistent/ca.pem") == std::string::npos) return 10;
        }
        setenv("ESPVPN_LANDLOCK", "0", 1);
        auto none = restrict_files({.read_only = {}, .read_write = {}});
        if (!none || *none != 0) return 11;
        if (landlock_description(0).find("none") == std::string::npos) return 12;
        if (!write_file("/tmp/espvpn-landlock-off." + std::to_string(getpid()))) return 13;
        unlink(("/tmp/espvpn-landlock-off." + std::to_string(getpid())).c_str());
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("restrict_files: works under the session's seccomp filter (applied after confine_session)") {
    unsetenv("ESPVPN_LANDLOCK");
    unsetenv("ESPVPN_SECCOMP");
    if (landlock_abi() == 0) {
        MESSAGE("skipped: the kernel has no Landlock");
        return;
    }
    TempDir runtime, outside;
    const Ended e = in_child([&] {
        if (!espvpn::sandbox::confine_session()) return 10;
        auto abi = restrict_files({.read_only = {}, .read_write = {runtime.path}});
        if (!abi || *abi == 0) return 11;
        if (!write_file(runtime.path + "/state")) return 12;
        if (write_file(outside.path + "/x") || errno != EACCES) return 13;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}
