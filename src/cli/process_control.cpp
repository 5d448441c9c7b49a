#include "src/cli/process_control.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "src/cli/exit_codes.h"
#include "src/io/owned_file.h"
#include "src/log/logger.h"
#include "src/sso/invoking_user.h"

namespace espvpn::cli {

Result<RunAsUser> RunAsUser::lookup(const std::string& name) {
    std::vector<char> buf(16384);
    passwd pw{}, *found = nullptr;
    int rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0) return make_error("--setuid: cannot look up user '" + name + "': " + strerror(rc));
    if (!found) {
        // openconnect also accepts a numeric uid.
        char* end = nullptr;
        unsigned long uid = std::strtoul(name.c_str(), &end, 10);
        if (name.empty() || *end) return make_error("--setuid: no user named '" + name + "'");
        rc = getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found);
        if (rc != 0 || !found) return make_error("--setuid: no user with uid " + name);
    }
    return RunAsUser{found->pw_name, found->pw_uid, found->pw_gid};
}

Status RunAsUser::drop() const {
    if (geteuid() != 0) {
        if (geteuid() == uid) return {};  // already that user (e.g. started by a service manager)
        return make_error("--setuid " + name + ": not running as root, cannot change user");
    }
    if (initgroups(name.c_str(), gid) != 0) return make_error("--setuid: initgroups: " + std::string(strerror(errno)));
    // glibc applies set*id to every thread of the process (datapath, script runner).
    if (setgid(gid) != 0) return make_error("--setuid: setgid: " + std::string(strerror(errno)));
    if (setuid(uid) != 0) return make_error("--setuid: setuid: " + std::string(strerror(errno)));
    if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
        return make_error("--setuid: root privileges could be regained; refusing to go on");
    LOG_INFO << "privileges dropped: running as " << name << " (uid " << uid << ", gid " << gid << ")";
    return {};
}

std::string csd_run_as(const ClientOptions& options) {
    if (!options.csd_user.empty()) return options.csd_user;
    if (options.csd_wrapper.empty() || geteuid() != 0) return {};
    if (!options.setuid_user.empty()) return options.setuid_user;
    auto invoker = sso::invoking_user();
    if (invoker && !invoker->is_root_alone && invoker->uid != 0) return invoker->name;
    LOG_INFO << "--csd-wrapper runs as nobody: espvpn runs as root and "
             << (invoker ? std::string("nobody invoked it through sudo or pkexec")
                         : "the invoking user is unclear (" + invoker.error().message + ")")
             << " (--csd-user USER to choose)";
    return "nobody";
}

Result<ProcessControl> ProcessControl::prepare(const ClientOptions& options) {
    ProcessControl pc;
    pc.background_ = options.background;
    if (!options.setuid_user.empty()) {
        auto user = RunAsUser::lookup(options.setuid_user);
        if (!user) return user.error();
        pc.run_as_ = std::move(*user);
    }
    if (!options.pid_file.empty()) {
        // Created new, never opened through a name someone else put there: a regular file
        // left by an earlier run is removed first (unlinking a name never follows it);
        // anything else there (a symlink) is refused.
        auto at = io::open_parent(options.pid_file);
        if (!at) return make_error("--pid-file '" + options.pid_file + "': " + at.error().message);
        struct stat st{};
        if (fstatat(at->dir.get(), at->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(at->dir.get(), at->name.c_str(), 0);
        auto fd = io::create_new_at(at->dir.get(), at->name, O_WRONLY, 0644, options.pid_file);
        if (!fd) return make_error("--pid-file: " + fd.error().message);
        pc.pid_fd_ = fd->release();
        pc.pid_file_ = options.pid_file;
        if (!pc.background_) pc.write_pid();
    }
    return pc;
}

ProcessControl::ProcessControl(ProcessControl&& o) noexcept
    : run_as_(std::move(o.run_as_)), background_(o.background_), backgrounded_(o.backgrounded_),
      pid_file_(std::move(o.pid_file_)), pid_fd_(o.pid_fd_), up_fd_(o.up_fd_) {
    o.pid_fd_ = o.up_fd_ = -1;
    o.pid_file_.clear();
}

ProcessControl::~ProcessControl() {
    if (up_fd_ >= 0) close(up_fd_);
    if (pid_fd_ >= 0) close(pid_fd_);
    // After --setuid the directory may not be ours any more; openconnect has the same limit.
    if (!pid_file_.empty() && unlink(pid_file_.c_str()) != 0)
        LOG_DEBUG << "--pid-file: cannot remove " << pid_file_ << ": " << strerror(errno);
}

void ProcessControl::write_pid() {
    std::string text = std::to_string(getpid()) + "\n";
    if (ftruncate(pid_fd_, 0) != 0 || pwrite(pid_fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
        LOG_WARN << "--pid-file: cannot write " << pid_file_ << ": " << strerror(errno);
}

void ProcessControl::background() {
    if (!background_ || backgrounded_) return;
    backgrounded_ = true;
    int up[2];
    if (pipe2(up, O_CLOEXEC) != 0) {
        LOG_ERROR << "--background: pipe: " << strerror(errno) << "; staying in the foreground";
        return;
    }
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    // The waiting command takes the ending signals from a signalfd (blocked before the fork:
    // none is lost; the child gets its mask back).
    sigset_t ending, old;
    sigemptyset(&ending);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&ending, s);
    sigprocmask(SIG_BLOCK, &ending, &old);
    pid_t child = fork();
    if (child < 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        LOG_ERROR << "--background: fork: " << strerror(errno) << "; staying in the foreground";
        close(up[0]);
        close(up[1]);
        return;
    }
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        close(up[0]);
        up_fd_ = up[1];
        if (pid_fd_ >= 0) write_pid();
        return;
    }
    // The parent: wait for "up" or the child's end; never return. A terminal's Ctrl-C (or
    // hang-up) reaches the whole foreground group, the child too: it ends the login, and this
    // command leaves with its status once it has (one exit, one message: the child's). A
    // signal sent to this command alone is passed on to the child.
    close(up[1]);
    const int sigfd = signalfd(-1, &ending, SFD_CLOEXEC | SFD_NONBLOCK);
    char byte = 0;
    ssize_t got = 0;
    for (;;) {
        pollfd p[2] = {{up[0], POLLIN, 0}, {sigfd, POLLIN, 0}};
        if (poll(p, sigfd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) break;
        signalfd_siginfo si;
        while (sigfd >= 0 && read(sigfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
            if (si.ssi_code != SI_KERNEL) kill(child, static_cast<int>(si.ssi_signo));
        if (p[0].revents == 0) continue;
        while ((got = read(up[0], &byte, 1)) < 0 && errno == EINTR) {
        }
        break;
    }
    if (got == 1) {
        LOG_INFO << "continuing in background; pid " << child;
        _exit(kExitOk);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : kExitError);
}

Status ProcessControl::drop_privileges() {
    return run_as_ ? run_as_->drop() : Status{};
}

void ProcessControl::leave_up_to_session() {
    if (up_fd_ >= 0) close(up_fd_);
    up_fd_ = -1;
}

void ProcessControl::forget_pid_file() {
    if (pid_fd_ >= 0) close(pid_fd_);
    pid_fd_ = -1;
    pid_file_.clear();
}

void ProcessControl::tunnel_up() {
    if (up_fd_ < 0) return;
    // Leave the terminal's session first, so its Ctrl-C no longer reaches the daemon.
    setsid();
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        close(null);
    }
    char byte = 1;
    while (write(up_fd_, &byte, 1) < 0 && errno == EINTR) {
    }
    close(up_fd_);
    up_fd_ = -1;
}

}  // namespace espvpn::cli
