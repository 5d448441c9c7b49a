#include "src/sso/browser_launcher.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "src/io/seqpacket.h"
#include "src/io/unique_fd.h"
#include "src/sso/invoking_user.h"

namespace espvpn::sso {

namespace {

// The session's end of the launcher's socket (-1: no launcher).
std::mutex launcher_mutex;
int launcher_fd = -1;

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != prefix[i]) return false;
    }
    return true;
}

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// DIR/espvpn-sso-XXXXXX/login.html, DIR absolute, no "." or ".." component, no empty one.
bool is_form_page_path(std::string_view p) {
    constexpr std::string_view page = "/login.html";
    constexpr std::string_view dir_prefix = "espvpn-sso-";
    if (p.size() < 2 || p[0] != '/' || !p.ends_with(page)) return false;
    std::string_view dir = p.substr(0, p.size() - page.size());
    const auto slash = dir.rfind('/');
    std::string_view name = dir.substr(slash + 1);
    if (name.size() != dir_prefix.size() + 6 || !name.starts_with(dir_prefix)) return false;
    for (char c : name.substr(dir_prefix.size()))
        if (!alnum(c)) return false;
    std::string_view rest = p.substr(1);
    while (!rest.empty()) {
        const auto next = rest.find('/');
        const std::string_view part = rest.substr(0, next);
        if (part.empty() || part == "." || part == "..") return false;
        if (next == std::string_view::npos) break;
        rest = rest.substr(next + 1);
    }
    return true;
}

// In the launcher: the form page is a regular file of this user in a directory of this user
// that no one else may enter (made by make_private_dir_for), neither of them a symlink.
Status form_page_is_ours(const std::string& path) {
    const uid_t me = ::getuid();
    struct stat dir{}, file{};
    const std::string parent = path.substr(0, path.rfind('/'));
    if (::lstat(parent.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode) || dir.st_uid != me || (dir.st_mode & 077) != 0)
        return make_error("the form page's directory is not a private directory of this user");
    if (::lstat(path.c_str(), &file) != 0 || !S_ISREG(file.st_mode) || file.st_uid != me)
        return make_error("the form page is not a regular file of this user");
    return {};
}

// The launcher's loop: never returns.
[[noreturn]] void serve(int fd, const std::string& program) {
    auto user = invoking_user();
    for (;;) {
        // The session has gone, or sent what it never sends (longer than it checks for, a
        // descriptor): the end either way.
        auto p = io::receive_packet(fd, kMaxLaunchTarget);
        if (!p || p->eof || p->fd.valid()) ::_exit(0);
        std::string answer = "y";
        const std::string target(p->bytes.begin(), p->bytes.end());
        Status ok = check_launch_target(target);
        if (ok && target[0] == '/') ok = form_page_is_ours(target);
        if (ok && !user) ok = user.error();
        if (ok) ok = start_as_user(*user, program, target);
        if (!ok) answer = "n" + ok.error().message.substr(0, 2000);
        if (!io::send_packet(fd, std::span(reinterpret_cast<const std::uint8_t*>(answer.data()), answer.size())))
            ::_exit(0);
    }
}

}  // namespace

Status check_launch_target(std::string_view t) {
    if (t.empty()) return make_error("nothing to open");
    if (t.size() > kMaxLaunchTarget)
        return make_error("the URL is longer than " + std::to_string(kMaxLaunchTarget) + " bytes");
    for (char c : t) {
        const auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f) return make_error("the URL holds a space, a control character or a non-ASCII byte");
    }
    if (t[0] == '/') {
        if (!is_form_page_path(t)) return make_error("a path that is not espvpn's identity provider form page");
        return {};
    }
    std::string_view rest;
    if (starts_with_nocase(t, "https://")) rest = t.substr(8);
    else if (starts_with_nocase(t, "http://")) rest = t.substr(7);
    else return make_error("not an http:// or https:// URL");
    if (rest.empty() || rest[0] == '/' || rest[0] == '?' || rest[0] == '#') return make_error("the URL names no host");
    return {};
}

Status start_browser_launcher(const std::string& program, const std::function<void()>& in_child) {
    io::UniqueFd ours, theirs;
    if (Status s = io::seqpacket_pair(ours, theirs); !s) return s;
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return make_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        // Ends with the session, and is off its terminal (a Ctrl-C is the session's to handle).
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(0);
        ::setsid();
        ::prctl(PR_SET_NAME, "espvpn-browser");
        if (in_child) in_child();
        // Only its socket and stdout/stderr (the browser's output goes where espvpn's does).
        ours.reset();
        if (::dup2(theirs.get(), 3) != 3) ::_exit(1);
        ::close_range(4, ~0U, 0);
        const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0 && null != 0) {
            ::dup2(null, 0);
            ::close(null);
        }
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        serve(3, program);
    }
    theirs.reset();
    std::lock_guard lock(launcher_mutex);
    if (launcher_fd >= 0) ::close(launcher_fd);
    launcher_fd = ours.release();
    return {};
}

bool has_browser_launcher() {
    std::lock_guard lock(launcher_mutex);
    return launcher_fd >= 0;
}

void stop_browser_launcher() {
    std::lock_guard lock(launcher_mutex);
    if (launcher_fd >= 0) ::close(launcher_fd);
    launcher_fd = -1;
}

Status launch_browser(const std::string& target) {
    if (Status s = check_launch_target(target); !s) return make_error("not opened in a browser: " + s.error().message);
    std::lock_guard lock(launcher_mutex);
    if (launcher_fd < 0) return make_error("no browser launcher");
    if (Status s = io::send_packet(launcher_fd, std::span(reinterpret_cast<const std::uint8_t*>(target.data()), target.size()));
        !s)
        return make_error("the browser launcher has gone: " + s.error().message);
    pollfd p{launcher_fd, POLLIN, 0};
    int r;
    while ((r = ::poll(&p, 1, 30000)) < 0 && errno == EINTR) {
    }
    if (r == 0) return make_error("the browser launcher did not answer within 30 s");
    auto answer = io::receive_packet(launcher_fd, 4096);
    if (!answer || answer->eof || answer->bytes.empty())
        return make_error("the browser launcher has gone");
    if (answer->bytes[0] == 'y') return {};
    return make_error(std::string(answer->bytes.begin() + 1, answer->bytes.end()));
}

}  // namespace espvpn::sso
