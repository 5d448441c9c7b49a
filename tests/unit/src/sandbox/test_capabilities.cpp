// keep_only_capabilities / drop_capability as the kernel applies them: each case forks a
// root child, reduces it, and then tries what root could do before (read another user's
// 0600 file, chown, mknod, give an exec'd program more) and what it must still do
// (CAP_NET_ADMIN in a network namespace of its own: a tun device, a link up).
#include <doctest/doctest.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/sandbox/capabilities.h"
#include "tests/unit/src/sandbox/child.h"

using espvpn::sandbox::drop_capability;
using espvpn::sandbox::keep_only_capabilities;
using espvpn::sandbox::KeepSetpcap;
using namespace espvpn::sandbox::test;

namespace {

constexpr unsigned long long bit(int cap) { return 1ULL << cap; }

unsigned long long hex_field(const std::string& status, const char* name) {
    return std::strtoull(status_field(status, name).c_str(), nullptr, 16);
}

// Sets lo up or down in the current network namespace; errno on failure.
int set_lo(bool up) {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    int err = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) err = errno;
    if (!err) {
        ifr.ifr_flags = static_cast<short>(up ? (ifr.ifr_flags | IFF_UP) : (ifr.ifr_flags & ~IFF_UP));
        if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) err = errno;
    }
    close(s);
    return err;
}

}  // namespace

TEST_CASE("keep_only_capabilities: exactly the kept capabilities; root's file powers are gone") {
    if (geteuid() != 0) {
        MESSAGE("skipped: needs root");
        return;
    }
    // Another user's private file, in a directory of its own.
    char dir[] = "/tmp/espvpn-caps.XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string secret = std::string(dir) + "/secret";
    const int fd = open(secret.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(fchown(fd, 65534, 65534) == 0);
    close(fd);

    const Ended e = in_child([&] {
        // Root can before (so the failures below are the drop's doing).
        const int before = open(secret.c_str(), O_RDONLY | O_CLOEXEC);
        if (before < 0) return 10;
        close(before);
        if (!keep_only_capabilities({CAP_NET_ADMIN})) return 11;
        const std::string st = read_text("/proc/self/status");
        for (const char* f : {"CapPrm", "CapEff", "CapInh", "CapBnd", "CapAmb"})
            if (hex_field(st, f) != bit(CAP_NET_ADMIN)) return 12;
        if (status_field(st, "NoNewPrivs") != "1") return 13;
        errno = 0;
        if (open(secret.c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES) return 14;  // no DAC override
        if (chown(secret.c_str(), 0, 0) == 0 || errno != EPERM) return 15;                  // no CAP_CHOWN
        const std::string node = std::string(dir) + "/mem";
        if (mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 1)) == 0 || errno != EPERM) return 16;  // no CAP_MKNOD
        if (setuid(0) != 0) return 17;  // still uid 0: allowed, and gives nothing back
        if (hex_field(read_text("/proc/self/status"), "CapEff") != bit(CAP_NET_ADMIN)) return 18;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
    unlink(secret.c_str());
    rmdir(dir);
}

TEST_CASE("keep_only_capabilities: a program it runs (the vpnc-script) gets the kept capabilities and no more") {
    if (geteuid() != 0) {
        MESSAGE("skipped: needs root");
        return;
    }
    const Ended e = in_child([] {
        if (!keep_only_capabilities({CAP_NET_ADMIN, CAP_NET_BIND_SERVICE})) return 11;
        const char* const argv[] = {"/bin/cat", "/proc/self/status", nullptr};
        const std::string st = run_output(argv);
        if (st.empty()) return 12;
        const unsigned long long want = bit(CAP_NET_ADMIN) | bit(CAP_NET_BIND_SERVICE);
        // uid 0 without SECBIT_NOROOT would get its bounding set at execve; here the ambient set.
        if (status_field(st, "Uid").rfind("0", 0) != 0) return 13;
        for (const char* f : {"CapPrm", "CapEff", "CapBnd", "CapAmb"})
            if (hex_field(st, f) != want) return 14;
        if (status_field(st, "NoNewPrivs") != "1") return 15;
        // After a drop the next program does not get it either.
        if (!drop_capability(CAP_NET_BIND_SERVICE)) return 16;
        const std::string after = run_output(argv);
        if (hex_field(after, "CapEff") != bit(CAP_NET_ADMIN) || hex_field(after, "CapPrm") != bit(CAP_NET_ADMIN))
            return 17;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("keep_only_capabilities with KeepSetpcap::yes: drop_capability empties the bounding set too, to CAP_NET_ADMIN alone") {
    if (geteuid() != 0) {
        MESSAGE("skipped: needs root");
        return;
    }
    const Ended e = in_child([] {
        if (!keep_only_capabilities({CAP_NET_ADMIN, CAP_NET_BIND_SERVICE}, KeepSetpcap::yes)) return 11;
        const unsigned long long both = bit(CAP_NET_ADMIN) | bit(CAP_NET_BIND_SERVICE);
        std::string st = read_text("/proc/self/status");
        if (hex_field(st, "CapBnd") != both) return 12;
        if (hex_field(st, "CapEff") != (both | bit(CAP_SETPCAP)) || hex_field(st, "CapPrm") != (both | bit(CAP_SETPCAP)))
            return 13;
        if (hex_field(st, "CapInh") != both || hex_field(st, "CapAmb") != both) return 14;
        // A program it runs never gets CAP_SETPCAP.
        const char* const argv[] = {"/bin/cat", "/proc/self/status", nullptr};
        if (hex_field(run_output(argv), "CapEff") != both) return 15;
        if (!drop_capability(CAP_NET_BIND_SERVICE)) return 16;
        if (!drop_capability(CAP_SETPCAP)) return 17;
        st = read_text("/proc/self/status");
        for (const char* f : {"CapPrm", "CapEff", "CapInh", "CapBnd", "CapAmb"})
            if (hex_field(st, f) != bit(CAP_NET_ADMIN)) return 18;
        // Without CAP_SETPCAP the bounding set cannot change any more.
        errno = 0;
        if (prctl(PR_CAPBSET_DROP, CAP_NET_ADMIN, 0, 0, 0) == 0 || errno != EPERM) return 19;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("keep_only_capabilities: CAP_NET_ADMIN still works (tun, link up); drop_capability takes it for good") {
    if (geteuid() != 0) {
        MESSAGE("skipped: needs root");
        return;
    }
    const Ended e = in_child([] {
        if (unshare(CLONE_NEWNET) != 0) return 10;  // a network namespace of this child's own
        if (!keep_only_capabilities({CAP_NET_ADMIN, CAP_NET_BIND_SERVICE})) return 11;
        if (set_lo(true) != 0) return 12;
        const int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (tun >= 0) {  // the broker's tun (absent in some containers)
            ifreq ifr{};
            ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
            std::strcpy(ifr.ifr_name, "capt%d");
            if (ioctl(tun, TUNSETIFF, &ifr) != 0) return 13;
            close(tun);
        }
        // CAP_NET_BIND_SERVICE: a port below 1024 (the DNS forwarder's), then dropped.
        const int s1 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(53);
        if (bind(s1, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 14;
        if (!drop_capability(CAP_NET_BIND_SERVICE)) return 15;
        const int s2 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        a.sin_port = htons(54);
        if (bind(s2, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 || errno != EACCES) return 16;
        if (set_lo(false) != 0) return 17;  // CAP_NET_ADMIN untouched by that drop
        if (!drop_capability(CAP_NET_ADMIN)) return 18;
        if (set_lo(true) != EPERM) return 19;
        const std::string st = read_text("/proc/self/status");
        for (const char* f : {"CapPrm", "CapEff", "CapInh", "CapAmb"})
            if (hex_field(st, f) != 0) return 20;
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}

TEST_CASE("keep_only_capabilities: refused without CAP_SETPCAP, an unknown capability refused") {
    const Ended e = in_child([] {
        if (keep_only_capabilities({9999})) return 10;
        if (drop_capability(-1)) return 11;
        if (geteuid() == 0) {
            if (!keep_only_capabilities({CAP_NET_ADMIN})) return 12;
            // CAP_SETPCAP is gone: a second reduction cannot touch the bounding set.
            if (keep_only_capabilities({})) return 13;
        }
        return 0;
    });
    CHECK(e.exited);
    CHECK(e.code == 0);
}
