#include "src/sso/invoking_user.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "protocols/base/exec_array.h"

namespace espvpn::sso {

namespace {

const char* env(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

bool parse_uid(const char* text, uid_t& out) {
    if (!text) return false;
    char* end = nullptr;
    errno = 0;
    unsigned long v = std::strtoul(text, &end, 10);
    if (errno || !end || *end || end == text || v >= UINT_MAX) return false;
    out = static_cast<uid_t>(v);
    return true;
}

}  // namespace

bool is_dir_of(const std::string& path, uid_t uid) {
    struct stat st{};
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid;
}

bool InvokingUser::has_display() const {
    for (const auto& e : environment)
        if (e.rfind("DISPLAY=", 0) == 0 || e.rfind("WAYLAND_DISPLAY=", 0) == 0) return true;
    return false;
}

Result<InvokingUser> invoking_user() {
    InvokingUser u;
    u.uid = ::getuid();
    const char* via = nullptr;
    if (u.uid == 0) {
        if (env("SUDO_UID")) via = "SUDO_UID";
        else if (env("PKEXEC_UID")) via = "PKEXEC_UID";
        // Someone invoked espvpn, but who is unclear: no browser runs as root on their behalf.
        if (via && !parse_uid(env(via), u.uid))
            return make_error(std::string("the invoking user's id (") + via + ") is not a number");
        if (!via) u.is_root_alone = true;
    }
    struct passwd pw{};
    struct passwd* found = nullptr;
    std::string buf(16384, '\0');
    if (::getpwuid_r(u.uid, &pw, buf.data(), buf.size(), &found) != 0 || !found)
        return make_error(std::string("the invoking user (uid ") + std::to_string(u.uid) +
                          (via ? std::string(", from ") + via : std::string()) + ") has no passwd entry");
    u.gid = pw.pw_gid;
    u.name = pw.pw_name;
    u.home = pw.pw_dir;

    auto& e = u.environment;
    e.push_back("HOME=" + u.home);
    e.push_back("USER=" + u.name);
    e.push_back("LOGNAME=" + u.name);
    e.push_back(std::string("PATH=") + (env("PATH") ? env("PATH") : "/usr/local/bin:/usr/bin:/bin"));
    // The session's variables as sudo/pkexec kept them; the usual places otherwise.
    for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "LANG", "LC_ALL", "XDG_SESSION_TYPE",
                             "XDG_CURRENT_DESKTOP", "BROWSER"})
        if (const char* v = env(name)) e.push_back(std::string(name) + "=" + v);
    std::string runtime = "/run/user/" + std::to_string(u.uid);
    const char* xdg = env("XDG_RUNTIME_DIR");
    if (xdg && is_dir_of(xdg, u.uid)) runtime = xdg;
    std::string bus = env("DBUS_SESSION_BUS_ADDRESS") ? env("DBUS_SESSION_BUS_ADDRESS") : "";
    if (is_dir_of(runtime, u.uid)) {
        e.push_back("XDG_RUNTIME_DIR=" + runtime);
        if (bus.empty() && ::access((runtime + "/bus").c_str(), F_OK) == 0) bus = "unix:path=" + runtime + "/bus";
    }
    if (!bus.empty()) e.push_back("DBUS_SESSION_BUS_ADDRESS=" + bus);
    return u;
}

Status start_as_user(const InvokingUser& user, const std::string& program, const std::string& argument) {
    // Everything the child needs is built before fork(): after it, only system calls.
    std::vector<std::string> words;
    std::istringstream split(program);
    for (std::string w; split >> w;) words.push_back(w);
    if (words.empty()) return make_error("no browser program given");
    words.push_back(argument);
    std::vector<char*> argv = exec_array(words);
    std::vector<std::string> env_copy = user.environment;
    std::vector<char*> envp = exec_array(env_copy);
    const UserSwitch sw = user_switch(user);
    // The exec error (or nothing: exec worked) comes back on a close-on-exec pipe.
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return make_error(std::string("pipe: ") + std::strerror(errno));
    pid_t mid = ::fork();
    if (mid < 0) {
        int err = errno;
        ::close(report[0]);
        ::close(report[1]);
        return make_error(std::string("fork: ") + std::strerror(err));
    }
    if (mid == 0) {
        ::close(report[0]);
        pid_t child = ::fork();
        if (child != 0) ::_exit(child < 0 ? 1 : 0);
        ::setsid();
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(2, 1);
        // espvpn's other descriptors (the TLS connection, the callback socket) stay with espvpn.
        ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        int fail_step = become_user(sw);
        if (fail_step == 0 && ::chdir(user.home.c_str()) != 0) (void)!::chdir("/");
        if (fail_step == 0) ::execvpe(argv[0], argv.data(), envp.data());
        int msg[2] = {fail_step, errno};
        (void)!::write(report[1], msg, sizeof msg);
        ::_exit(127);
    }
    ::close(report[1]);
    int status = 0;
    while (::waitpid(mid, &status, 0) < 0 && errno == EINTR) {
    }
    int msg[2] = {0, 0};
    ssize_t n;
    while ((n = ::read(report[0], msg, sizeof msg)) < 0 && errno == EINTR) {
    }
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof msg)) {
        static const char* const steps[] = {"exec", "setgroups", "setgid", "setuid"};
        return make_error("could not start the browser '" + words.front() + "' as " + user.name + ": " +
                          steps[msg[0] & 3] + ": " + std::strerror(msg[1]));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return make_error("could not start the browser (fork failed)");
    return {};
}

UserSwitch user_switch(const InvokingUser& user) {
    UserSwitch s;
    s.needed = ::getuid() != user.uid || ::geteuid() != user.uid;
    if (!s.needed) return s;
    s.uid = user.uid;
    s.gid = user.gid;
    s.groups.resize(64);
    int n = static_cast<int>(s.groups.size());
    if (::getgrouplist(user.name.c_str(), user.gid, s.groups.data(), &n) < 0) {
        s.groups.resize(static_cast<std::size_t>(n));
        if (::getgrouplist(user.name.c_str(), user.gid, s.groups.data(), &n) < 0) n = 0;
    }
    s.groups.resize(static_cast<std::size_t>(n));
    return s;
}

int become_user(const UserSwitch& s) {
    if (!s.needed) return 0;
    if (::setgroups(s.groups.size(), s.groups.data()) != 0) return 1;
    if (::setgid(s.gid) != 0) return 2;
    if (::setuid(s.uid) != 0) return 3;
    return 0;
}

Status remove_dir_as_user(const InvokingUser& user, const std::string& dir) {
    const UserSwitch sw = user_switch(user);
    if (!sw.needed) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        if (ec) return make_error("could not remove " + dir + ": " + ec.message());
        return {};
    }
    pid_t pid = ::fork();
    if (pid == 0) {
        if (become_user(sw) != 0) ::_exit(126);
        std::error_code ec;
        bool ok = true;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
            std::error_code e;
            std::filesystem::remove_all(entry.path(), e);
            ok = ok && !e;
        }
        ::_exit(ok && !ec ? 0 : 1);
    }
    int st = 0;
    if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return make_error("could not remove " + dir + " as " + user.name);
    if (::rmdir(dir.c_str()) != 0) return make_error("could not remove " + dir + ": " + std::strerror(errno));
    return {};
}

}  // namespace espvpn::sso
