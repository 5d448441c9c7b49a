// Runs a body in a forked child and reports how the child ended, for the sandbox tests:
// each confines a child, makes the call it means to, and reads the outcome here.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace espvpn::sandbox::test {

struct Ended {
    bool exited = false;
    int code = -1;
    int signal = 0;
};

// The child exits with body's value (an uncaught signal ends it with that signal).
inline Ended in_child(const std::function<int()>& body) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return {};
    if (pid == 0) _exit(body());
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return {};
    Ended e;
    if (WIFEXITED(status)) {
        e.exited = true;
        e.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
    }
    return e;
}

// The value of "Name:" in a /proc status text ("" when absent).
inline std::string status_field(const std::string& text, const std::string& name) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(name + ":", 0) == 0) {
            std::string v = line.substr(name.size() + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            return v;
        }
    return "";
}

inline std::string read_text(const char* path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Runs argv in a child (stdout to a pipe) and returns what it printed; "" on failure.
inline std::string run_output(const char* const argv[]) {
    int p[2];
    if (pipe(p) != 0) return "";
    const pid_t pid = fork();
    if (pid < 0) return "";
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execv(argv[0], const_cast<char* const*>(argv));
        _exit(127);
    }
    close(p[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : "";
}

}  // namespace espvpn::sandbox::test
