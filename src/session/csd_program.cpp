#include "src/session/csd_program.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "protocols/base/exec_array.h"
#include "src/io/unique_fd.h"

extern char** environ;

namespace espvpn::session {

Result<std::string> run_for_output(const ProgramRun& run) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    const bool piped = ::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0;
    // Closed on every way out; the write ends once the child has them.
    io::UniqueFd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]);
    if (!piped) return make_error(std::string("pipe: ") + std::strerror(errno));
    // Everything the child needs is prepared before fork (no allocation after it).
    std::vector<std::string> argv_s{run.program};
    argv_s.insert(argv_s.end(), run.args.begin(), run.args.end());
    std::vector<char*> argv = exec_array(argv_s);
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
    env_s.insert(env_s.end(), run.extra_env.begin(), run.extra_env.end());
    std::vector<char*> envp = exec_array(env_s);
    // A user name, or (as openconnect) a uid; no switch when it is espvpn's own user.
    uid_t uid = 0;
    gid_t gid = 0;
    bool switch_user = false;
    if (!run.run_as_user.empty()) {
        const passwd* pw = ::getpwnam(run.run_as_user.c_str());
        char* end = nullptr;
        const unsigned long number = std::strtoul(run.run_as_user.c_str(), &end, 10);
        if (!pw && end && *end == 0) pw = ::getpwuid(static_cast<uid_t>(number));
        if (!pw) return make_error("--csd-user: no such user '" + run.run_as_user + "'");
        uid = pw->pw_uid;
        gid = pw->pw_gid;
        switch_user = uid != ::geteuid() || gid != ::getegid();
        if (switch_user && ::geteuid() != 0)
            return make_error("--csd-user " + run.run_as_user + ": espvpn is not root, it cannot run " + run.program +
                              " as another user");
    }

    pid_t pid = ::fork();
    if (pid < 0) return make_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::setpgid(0, 0);  // its own group: a timeout or cancel kills what it started too
        ::dup2(out_w.get(), 1);
        ::dup2(err_w.get(), 2);
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        if (switch_user && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0))
            ::_exit(126);
        ::execve(argv[0], argv.data(), envp.data());
        ::_exit(127);
    }
    out_w.reset();
    err_w.reset();

    std::string output, errors;
    bool too_big = false, timed_out = false, cancelled = false;
    const auto deadline = std::chrono::steady_clock::now() + run.timeout;
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {run.cancel_fd, POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        int n = ::poll(fds, 3, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        if (fds[2].revents & POLLIN) {
            cancelled = true;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
            if (got <= 0) {
                (i == 0 ? out_r : err_r).reset();
                fds[i].fd = -1;
                --open_fds;
                continue;
            }
            std::string& into = i == 0 ? output : errors;
            into.append(buf, static_cast<std::size_t>(got));
            if (i == 1 && errors.size() > 4096) errors.erase(0, errors.size() - 4096);
            if (i == 0 && output.size() > run.max_output) too_big = true;
        }
        if (too_big) break;
    }
    if (timed_out || too_big || cancelled) {
        ::kill(-pid, SIGKILL);  // the group (if the child got to make it) and the child
        ::kill(pid, SIGKILL);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    while (!errors.empty() && (errors.back() == '\n' || errors.back() == '\r' || errors.back() == ' ')) errors.pop_back();
    const std::string tail = errors.empty() ? "" : ": " + errors.substr(errors.size() > 300 ? errors.size() - 300 : 0);
    if (cancelled) return make_error(run.program + " stopped: cancelled");
    if (timed_out)
        return make_error(run.program + " did not finish within " + std::to_string(run.timeout.count()) + " ms");
    if (too_big) return make_error(run.program + " printed more than " + std::to_string(run.max_output) + " bytes");
    if (WIFSIGNALED(status))
        return make_error(run.program + " was killed by signal " + std::to_string(WTERMSIG(status)) + tail);
    const std::string as = switch_user ? " as " + run.run_as_user + " (uid " + std::to_string(uid) + ")" : "";
    if (WEXITSTATUS(status) == 127) return make_error("cannot run " + run.program + as + tail);
    if (WEXITSTATUS(status) == 126 && switch_user && errors.empty())
        return make_error("cannot run " + run.program + as + ": switching user failed");
    if (WEXITSTATUS(status) != 0)
        return make_error(run.program + " exited with status " + std::to_string(WEXITSTATUS(status)) + tail);
    return output;
}

}  // namespace espvpn::session
