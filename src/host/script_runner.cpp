#include "src/host/script_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "protocols/base/exec_array.h"
#include "src/log/logger.h"

extern char** environ;

namespace espvpn::host {

namespace {

constexpr std::size_t kStderrKeep = 4096;

// The child's environment: ours, minus contract variables we do not set, plus
// the ones we do. Values are strings the child owns after spawn.
std::vector<std::string> child_environment(const ScriptEnv& env) {
    std::map<std::string, std::optional<std::string>> ours(env.begin(), env.end());
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        std::string_view entry(*e);
        std::string name(entry.substr(0, entry.find('=')));
        if (ours.count(name) || is_contract_variable(name)) continue;
        out.emplace_back(entry);
    }
    for (const auto& [name, value] : ours)
        if (value) out.push_back(name + "=" + *value);
    return out;
}

// Has the child exited? Leaves it waitable (WNOWAIT) for the final waitpid.
bool child_exited(pid_t pid) {
    siginfo_t si{};
    return waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

}  // namespace

ScriptRunner::ScriptRunner(std::string command, std::chrono::milliseconds timeout)
    : command_(std::move(command)), timeout_(timeout), thread_([this] { worker(); }) {}

ScriptRunner::~ScriptRunner() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

std::shared_future<ScriptResult> ScriptRunner::run(ScriptEnv env) {
    std::promise<ScriptResult> promise;
    std::shared_future<ScriptResult> future = promise.get_future().share();
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(Job{std::move(env), std::move(promise)});
    }
    wake_.notify_one();
    return future;
}

void ScriptRunner::worker() {
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, and nothing left to run
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        job.done.set_value(execute(job.env));
    }
}

ScriptResult ScriptRunner::execute(const ScriptEnv& env) {
    ScriptResult result;
    std::string reason = "?";
    for (const auto& [name, value] : env)
        if (name == "reason" && value) reason = *value;

    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        result.error = std::string("pipe: ") + strerror(errno);
        LOG_ERROR << "script '" << command_ << "' (" << reason << ") not run: " << result.error;
        return result;
    }

    std::vector<std::string> env_strings = child_environment(env);
    std::vector<char*> envp = exec_array(env_strings);
    std::string shell = "/bin/sh", dash_c = "-c";
    char* argv[] = {shell.data(), dash_c.data(), command_.data(), nullptr};

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Own process group, so a timeout can stop the script and whatever it started;
    // default signal dispositions and an empty mask, whatever our threads block.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    // Normal scheduling: a script must not inherit a real-time priority given to the
    // datapath (chrt), or its shell and tools would compete with packet forwarding.
    sched_param normal{};
    posix_spawnattr_setschedpolicy(&attr, SCHED_OTHER);
    posix_spawnattr_setschedparam(&attr, &normal);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSCHEDULER);

    auto start = std::chrono::steady_clock::now();
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(err_pipe[1]);
    if (rc != 0) {
        close(err_pipe[0]);
        result.error = std::string("spawn /bin/sh: ") + strerror(rc);
        LOG_ERROR << "script '" << command_ << "' (" << reason << ") not run: " << result.error;
        return result;
    }
    result.started = true;
    LOG_DEBUG << "script '" << command_ << "' started for " << reason << " (pid " << pid << ")";

    // Collect stderr while the script runs. Stop when the shell exits (even if a
    // daemon it started keeps stderr open), or at the timeout.
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    auto deadline = start + timeout_;
    char buf[1024];
    auto drain = [&] {
        ssize_t got;
        while ((got = read(err_pipe[0], buf, sizeof buf)) > 0) {
            result.stderr_text.append(buf, static_cast<std::size_t>(got));
            if (result.stderr_text.size() > kStderrKeep)
                result.stderr_text.erase(0, result.stderr_text.size() - kStderrKeep);
        }
        return got == 0;  // EOF
    };
    bool pipe_open = true;
    for (;;) {
        int wait_ms = pidfd < 0 ? 100 : -1;  // without pidfd, poll the child's state
        if (timeout_.count() > 0) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                result.timed_out = true;
                break;
            }
            wait_ms = wait_ms < 0 ? static_cast<int>(left.count())
                                  : std::min<int>(wait_ms, static_cast<int>(left.count()));
        }
        pollfd p[2] = {{pipe_open ? err_pipe[0] : -1, POLLIN, 0}, {pidfd, POLLIN, 0}};
        int n = poll(p, 2, wait_ms);
        if (n < 0 && errno != EINTR) break;
        if (pipe_open && (p[0].revents & (POLLIN | POLLHUP))) pipe_open = !drain();
        bool exited = pidfd >= 0 ? (p[1].revents & POLLIN) != 0 : child_exited(pid);
        if (exited) {
            if (pipe_open) drain();
            break;
        }
    }
    if (pidfd >= 0) close(pidfd);
    close(err_pipe[0]);
    if (result.timed_out) kill(-pid, SIGKILL);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);

    while (!result.stderr_text.empty() && result.stderr_text.back() == '\n')
        result.stderr_text.pop_back();
    if (result.timed_out) {
        LOG_ERROR << "script '" << command_ << "' (" << reason << ") killed after "
                  << timeout_.count() << " ms";
    } else if (result.signal) {
        LOG_ERROR << "script '" << command_ << "' (" << reason << ") exited abnormally (signal "
                  << result.signal << ")";
    } else if (result.exit_status != 0) {
        LOG_ERROR << "script '" << command_ << "' (" << reason << ") returned error "
                  << result.exit_status;
    } else {
        LOG_DEBUG << "script '" << command_ << "' (" << reason << ") done in "
                  << result.duration.count() << " ms";
    }
    if (!result.stderr_text.empty())
        LOG_INFO << "script stderr (" << reason << "): " << result.stderr_text;
    return result;
}

}  // namespace espvpn::host
