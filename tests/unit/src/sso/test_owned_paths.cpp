// Issue 41: what espvpn (root) makes for the invoking user in places that user can write
// (the SSO callback socket in /run/user/UID, the IdP form's directory and the driven browser's
// profile in $TMPDIR) is made as that user or handed over by descriptor, never chowned by
// path: between a create and a chown(path) the user could swap in a symlink, and chown
// would follow it (to /etc/shadow, say). The race cannot be hit on demand, so the tests take away the means: each runs in a child whose seccomp filter fails
// chown, lchown and fchownat (the calls that take a path) with EPERM, and checks the owner.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "src/sso/callback_socket.h"
#include "src/sso/devtools_browser.h"
#include "src/sso/external_browser.h"
#include "src/sso/invoking_user.h"

using namespace espvpn;

namespace {

void forbid_chown_by_path() {
    std::vector<sock_filter> f{BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))};
    auto deny = [&](unsigned nr) {
        f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
        f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    };
#ifdef __NR_chown
    deny(__NR_chown);
#endif
#ifdef __NR_lchown
    deny(__NR_lchown);
#endif
    deny(__NR_fchownat);
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        ::_exit(99);
}

// Runs `body` in a forked child under forbid_chown_by_path(); its stdin is `stdin_fd` when
// given. "" when it passed, else what failed.
std::string in_child(const std::function<std::string()>& body, int stdin_fd = -1) {
    int report[2];
    REQUIRE(::pipe(report) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(report[0]);
        if (stdin_fd >= 0) ::dup2(stdin_fd, 0);
        forbid_chown_by_path();
        std::string why = body();
        (void)!::write(report[1], why.data(), why.size());
        ::_exit(why.empty() ? 0 : 1);
    }
    ::close(report[1]);
    std::string why;
    char buf[512];
    for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) why.append(buf, static_cast<std::size_t>(n));
    ::close(report[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 99) return "could not install the seccomp filter";
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && why.empty())) return "the child died";
    return why;
}

std::optional<sso::InvokingUser> nobody() {
    const passwd* pw = ::getpwnam("nobody");
    if (!pw) return std::nullopt;
    sso::InvokingUser u;
    u.uid = pw->pw_uid;
    u.gid = pw->pw_gid;
    u.name = "nobody";
    return u;
}

std::string owner_of(const std::string& path, mode_t type) {
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0) return path + ": missing";
    std::ostringstream s;
    s << ((st.st_mode & S_IFMT) == type ? "" : "wrong type ") << st.st_uid << ":" << st.st_gid << " " << std::oct
      << (st.st_mode & 07777);
    return s.str();
}

// A free TCP port on 127.0.0.1 (bound, noted, closed).
std::uint16_t free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("SSO callback socket: made as the invoking user, no chown by path, a planted symlink not followed") {
    auto user = nobody();
    if (::geteuid() != 0 || !user) {
        MESSAGE("skipped: needs root and a user nobody");
        return;
    }
    const std::string path = sso::callback_socket_path(user->uid);
    const std::string want = std::to_string(user->uid) + ":" + std::to_string(user->gid) + " 600";
    CHECK(in_child([&]() -> std::string {
              auto l = sso::CallbackListener::open(*user);
              if (!l) return "open: " + l.error().message;
              std::string got = owner_of(path, S_IFSOCK);
              return got == want ? "" : "the socket is " + got + ", not " + want;
          }) == "");
    // The name taken by a symlink to a root-only file: refused, the file keeps its owner.
    char dir[] = "/tmp/espvpn-sso-plant-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string target = std::string(dir) + "/root-only";
    { std::ofstream(target) << "x"; }
    REQUIRE(::chmod(target.c_str(), 0600) == 0);
    ::unlink(path.c_str());
    REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
    REQUIRE(::lchown(path.c_str(), user->uid, user->gid) == 0);
    std::string planted = in_child([&]() -> std::string {
        auto l = sso::CallbackListener::open(*user);
        return l ? "opened over a symlink" : l.error().message;
    });
    CHECK(planted.find("not a socket") != std::string::npos);
    CHECK(owner_of(target, S_IFREG) == "0:0 600");
    ::unlink(path.c_str());
    std::filesystem::remove_all(dir);
}

TEST_CASE("SSO IdP form: its directory and page are made as the invoking user, no chown by path") {
    auto user = nobody();
    if (::geteuid() != 0 || !user) {
        MESSAGE("skipped: needs root and a user nobody");
        return;
    }
    // The "browser" runs as nobody and notes who owns what it was given to open.
    const auto port = free_port();
    char dir[] = "/tmp/espvpn-sso-form-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    REQUIRE(::chmod(dir, 0777) == 0);
    const std::string seen = std::string(dir) + "/seen";
    const std::string script = std::string(dir) + "/browser";
    {
        std::ofstream f(script);
        f << "#!/bin/sh\nstat -c '%u:%g %a' \"$(dirname \"$1\")\" \"$1\" > " << seen << ".new && mv " << seen
          << ".new " << seen << "\n";
    }
    REQUIRE(::chmod(script.c_str(), 0755) == 0);
    // The login (AnyConnect's loopback end, so that only the form is made for the user) ends
    // with a token pasted on stdin, once the browser has looked.
    int paste[2];
    REQUIRE(::pipe(paste) == 0);
    std::atomic<bool> over{false};
    std::thread paster([&] {
        for (int i = 0; i < 600 && !over && ::access(seen.c_str(), F_OK) != 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const std::string line = "token-1\n";
        (void)!::write(paste[1], line.data(), line.size());
        ::close(paste[1]);
    });
    const std::string result = in_child(
        [&]() -> std::string {
            ::setenv("SUDO_UID", std::to_string(user->uid).c_str(), 1);
            ::unsetenv("PKEXEC_UID");
            sso::ExternalBrowserOptions o;
            o.program = script;
            o.timeout = std::chrono::seconds(60);
            o.read_stdin = true;
            session::SsoStart start;
            start.html = "<html><form></form></html>";
            session::SsoFinish finish;
            finish.loopback_port = port;
            auto r = sso::make_external_browser(o)->run(start, finish);
            if (!r) return "run: " + r.error().message;
            return r->token.reveal_text() == "token-1" ? "" : "not the pasted token";
        },
        paste[0]);
    over = true;
    paster.join();
    ::close(paste[0]);
    CHECK(result == "");
    std::ifstream in(seen);
    std::string dir_line, file_line;
    std::getline(in, dir_line);
    std::getline(in, file_line);
    const std::string ids = std::to_string(user->uid) + ":" + std::to_string(user->gid);
    CHECK(dir_line == ids + " 700");
    CHECK(file_line == ids + " 600");
    std::filesystem::remove_all(dir);
}

TEST_CASE("SSO driven browser: its profile directory is handed to the invoking user, no chown by path") {
    auto user = nobody();
    if (::geteuid() != 0 || !user) {
        MESSAGE("skipped: needs root and a user nobody");
        return;
    }
    // The "browser" runs as nobody, notes who owns its --user-data-dir and exits (no DevTools).
    char dir[] = "/tmp/espvpn-sso-profile-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    REQUIRE(::chmod(dir, 0777) == 0);
    const std::string seen = std::string(dir) + "/seen";
    const std::string script = std::string(dir) + "/browser";
    {
        std::ofstream f(script);
        f << "#!/bin/sh\nfor a; do case $a in --user-data-dir=*) stat -c '%u:%g %a' \"${a#*=}\" > " << seen
          << ";; esac; done\n";
    }
    REQUIRE(::chmod(script.c_str(), 0755) == 0);
    const std::string result = in_child([&]() -> std::string {
        ::setenv("SUDO_UID", std::to_string(user->uid).c_str(), 1);
        ::unsetenv("PKEXEC_UID");
        ::setenv("TMPDIR", dir, 1);
        sso::DrivenBrowserOptions o;
        o.command = script;
        o.timeout = std::chrono::seconds(20);
        session::SsoStart start;
        start.url = "https://idp.invalid/sso";
        session::SsoFinish finish;
        finish.gp_acs = true;
        auto r = sso::make_driven_browser(o)->run(start, finish);
        if (r) return "the stand-in browser finished a login";
        // It must have got as far as starting the browser: the profile was made and handed over.
        return r.error().message.find("profile") == std::string::npos ? "" : "run: " + r.error().message;
    });
    CHECK(result == "");
    std::string line;
    std::getline(std::ifstream(seen), line);
    CHECK(line == std::to_string(user->uid) + ":" + std::to_string(user->gid) + " 700");
    std::filesystem::remove_all(dir);
}
