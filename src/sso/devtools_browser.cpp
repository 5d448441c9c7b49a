#include "src/sso/devtools_browser.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "protocols/base/ascii.h"
#include "protocols/base/exec_array.h"
#include "protocols/http/form.h"
#include "src/io/owned_file.h"
#include "src/io/unique_fd.h"
#include "src/log/logger.h"
#include "src/sso/invoking_user.h"
#include "src/sso/login_signals.h"

extern char** environ;

namespace espvpn::sso {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using session::SsoFinish;
using session::SsoResult;
using session::SsoStart;

// A DevTools message is one JSON text; a response body can be large, but not this large.
constexpr std::size_t kMaxMessage = 64u << 20;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Words split on blanks; '...' or "..." keeps blanks inside a word
// (--host-resolver-rules="MAP * 127.0.0.1").
Result<std::vector<std::string>> split_command(const std::string& command) {
    std::vector<std::string> out;
    std::string word;
    bool in_word = false;
    char quote = 0;
    for (char c : command) {
        if (quote) {
            if (c == quote) quote = 0;
            else word += c;
        } else if (c == '\'' || c == '"') {
            quote = c;
            in_word = true;
        } else if (c == ' ' || c == '\t') {
            if (in_word) out.push_back(std::move(word));
            word.clear();
            in_word = false;
        } else {
            word += c;
            in_word = true;
        }
    }
    if (quote) return make_error(std::string("--sso-browser: unbalanced ") + quote + " in the command");
    if (in_word) out.push_back(std::move(word));
    return out;
}

// The program's path, as execvp would find it, resolved before fork.
std::optional<std::string> find_program(const std::string& name) {
    if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        std::string full = (dir.empty() ? "." : dir) + "/" + name;
        if (::access(full.c_str(), X_OK) == 0) return full;
    }
    return std::nullopt;
}

// The browser process: its own process group (so the terminal's Ctrl-C reaches
// espvpn, which then closes it, and nothing of it outlives the login), the
// DevTools pipe on its fds 3 (commands in) and 4 (replies and events out), and
// the private profile directory, removed when it is gone.
class BrowserProcess {
public:
    ~BrowserProcess() { stop(std::chrono::milliseconds(0)); }

    Status start(const std::vector<std::string>& command, const InvokingUser& user) {
        user_ = user;
        const UserSwitch sw = user_switch(user);
        auto program = find_program(command.front());
        if (!program) return make_error("--sso-browser: no program \"" + command.front() + "\" found in PATH");
        const char* tmpdir = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/espvpn-sso-XXXXXX";
        // Handed to the user by its descriptor, never chowned by path.
        auto dir = io::make_private_dir_for(tmpl, sw.needed ? user.uid : ::geteuid(), sw.needed ? user.gid : ::getegid());
        if (!dir) return make_error("the browser's profile directory: " + dir.error().message);
        profile_ = *dir;

        std::vector<std::string> argv_s{*program};
        argv_s.insert(argv_s.end(), command.begin() + 1, command.end());
        for (const char* flag : {"--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
                                 "--disable-sync", "--disable-background-networking", "--disable-component-update",
                                 "--disable-default-apps", "--disable-extensions", "--no-pings",
                                 "--password-store=basic", "--use-mock-keychain"})
            argv_s.emplace_back(flag);
        argv_s.push_back("--user-data-dir=" + profile_);
        argv_s.emplace_back("about:blank");
        std::vector<char*> argv = exec_array(argv_s);

        std::vector<std::string> env_s;
        if (sw.needed) {
            // The user's own session, not root's environment.
            env_s = user.environment;
        } else {
            for (char** e = environ; *e; ++e)
                if (std::strncmp(*e, "TMPDIR=", 7) != 0) env_s.emplace_back(*e);
        }
        // Its temporary files (the singleton socket) go into the profile, removed with it.
        env_s.push_back("TMPDIR=" + profile_);
        std::vector<char*> envp = exec_array(env_s);

        // Each pipe: [0] its read end, [1] its write end.
        io::UniqueFd to_browser[2], from_browser[2], exec_status[2];
        for (io::UniqueFd* p : {to_browser, from_browser, exec_status}) {
            int fds[2];
            if (::pipe2(fds, O_CLOEXEC) != 0) return make_error(errno_text("pipe"));
            p[0].reset(fds[0]);
            p[1].reset(fds[1]);
        }
        pid_t pid = ::fork();
        if (pid < 0) return make_error(errno_text("fork"));
        if (pid == 0) {
            // Only async-signal-safe calls from here.
            ::setpgid(0, 0);
            int in = ::fcntl(to_browser[0].get(), F_DUPFD, 10);
            int out = ::fcntl(from_browser[1].get(), F_DUPFD, 10);
            int status = ::fcntl(exec_status[1].get(), F_DUPFD_CLOEXEC, 10);
            int devnull = ::open("/dev/null", O_RDWR);
            if (in < 0 || out < 0 || status < 0 || devnull < 0) ::_exit(126);
            ::dup2(devnull, 0);
            ::dup2(devnull, 1);  // the browser's chatter is not espvpn's log (it may name URLs)
            ::dup2(devnull, 2);
            ::dup2(in, 3);
            ::dup2(out, 4);
            ::close_range(5, ~0U, CLOSE_RANGE_CLOEXEC);
            int err = 0;
            if (become_user(sw) != 0) err = errno ? errno : EPERM;
            if (err == 0) {
                ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
                sigset_t none;
                sigemptyset(&none);
                ::sigprocmask(SIG_SETMASK, &none, nullptr);
                ::signal(SIGPIPE, SIG_DFL);
                ::execve(argv[0], argv.data(), envp.data());
                err = errno;
            }
            [[maybe_unused]] auto n = ::write(status, &err, sizeof err);
            ::_exit(127);
        }
        pid_ = pid;
        ::setpgid(pid, pid);  // also here: no race with the first kill(-pid)
        for (io::UniqueFd* child_end : {&to_browser[0], &from_browser[1], &exec_status[1]}) child_end->reset();
        in_ = std::move(to_browser[1]);
        out_ = std::move(from_browser[0]);
        ::fcntl(out_.get(), F_SETFL, O_NONBLOCK);
        ::fcntl(in_.get(), F_SETFL, O_NONBLOCK);
        int err = 0;
        ssize_t n;
        do n = ::read(exec_status[0].get(), &err, sizeof err);
        while (n < 0 && errno == EINTR);
        if (n == sizeof err) {
            stop(std::chrono::milliseconds(0));
            errno = err;
            return make_error(errno_text(("--sso-browser: cannot start " + *program).c_str()));
        }
        LOG_DEBUG << "started the browser " << *program << " (pid " << pid_ << ")"
                  << (sw.needed ? " as " + user.name : std::string()) << ", profile " << profile_;
        return {};
    }

    int in() const { return in_.get(); }
    int out() const { return out_.get(); }

    // Waits up to `grace` for the browser to exit, then kills its process group and
    // removes the profile. Idempotent.
    void stop(std::chrono::milliseconds grace) {
        in_.reset();
        if (pid_ > 0) {
            const auto until = Clock::now() + grace;
            bool exited = false;
            for (;;) {
                int st = 0;
                pid_t r = ::waitpid(pid_, &st, WNOHANG);
                if (r == pid_ || (r < 0 && errno == ECHILD)) {
                    exited = true;
                    break;
                }
                if (Clock::now() >= until) break;
                ::usleep(20000);  // polling a child's exit, bounded by `grace`
            }
            // Its helpers (renderer, GPU, zygote) share the group: none outlives the login.
            ::kill(-pid_, SIGKILL);
            if (!exited) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, nullptr, 0);
            }
            pid_ = -1;
        }
        out_.reset();
        if (!profile_.empty()) {
            remove_profile();
            profile_.clear();
        }
    }

private:
    // As the browser's user (invoking_user.h): root never walks a tree that user could change.
    void remove_profile() {
        if (auto s = remove_dir_as_user(user_, profile_); !s)
            LOG_WARN << "could not remove the browser profile: " << s.error().message;
    }

    pid_t pid_ = -1;
    io::UniqueFd in_, out_;
    std::string profile_;
    InvokingUser user_;
};

// One DevTools conversation over the pipe: commands with ids, replies matched to
// them, events queued in order. Never logs message contents (cookies, bodies).
class DevTools {
public:
    struct Timeout {};
    struct Closed {};
    struct Interrupted {
        int signal;
    };
    struct Failed {
        std::string why;
    };
    using Next = std::variant<json, Timeout, Closed, Interrupted, Failed>;

    DevTools(BrowserProcess& browser, LoginSignals& signals) : browser_(browser), signals_(signals) {}

    // Sends a command (to a page's session when session is not empty) and waits for its reply.
    // Events arriving meanwhile are kept for next_event(). Non-json Next: why it did not come.
    Next call(const std::string& method, json params, const std::string& session, Clock::time_point deadline) {
        const int id = ++last_id_;
        json msg = {{"id", id}, {"method", method}, {"params", std::move(params)}};
        if (!session.empty()) msg["sessionId"] = session;
        if (auto w = write_all(msg.dump() + '\0', deadline); !std::holds_alternative<json>(w)) return w;
        for (;;) {
            Next n = read_message(deadline);
            if (!std::holds_alternative<json>(n)) return n;
            json& m = std::get<json>(n);
            if (m.contains("id")) {
                if (!m["id"].is_number_integer() || m["id"].get<int>() != id) continue;  // a late reply
                if (m.contains("error")) {
                    std::string why = m["error"].value("message", std::string("error"));
                    return Failed{method + ": " + why};
                }
                return m.contains("result") ? std::move(m["result"]) : json::object();
            }
            events_.push_back(std::move(m));
        }
    }

    Next next_event(Clock::time_point deadline) {
        if (!events_.empty()) {
            json e = std::move(events_.front());
            events_.pop_front();
            return e;
        }
        for (;;) {
            Next n = read_message(deadline);
            if (std::holds_alternative<json>(n) && std::get<json>(n).contains("id")) continue;  // a stray reply
            return n;
        }
    }

    // Whether the browser ever spoke the DevTools protocol.
    bool heard() const { return heard_; }

    // Asks the browser to close (no reply is awaited).
    void send_close() {
        json msg = {{"id", ++last_id_}, {"method", "Browser.close"}, {"params", json::object()}};
        write_all(msg.dump() + '\0', Clock::now() + std::chrono::seconds(1));
    }

private:
    // Non-blocking, bounded by the deadline and ended by Ctrl-C: a browser that stops reading
    // cannot hang the login. json{} when all was written.
    Next write_all(const std::string& data, Clock::time_point deadline) {
        if (browser_.in() < 0) return Closed{};
        std::size_t off = 0;
        while (off < data.size()) {
            ssize_t n = ::write(browser_.in(), data.data() + off, data.size() - off);
            if (n > 0) {
                off += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno != EAGAIN) return Closed{};  // EPIPE: the browser is gone (SIGPIPE blocked, drained)
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return Timeout{};
            pollfd fds[2] = {{browser_.in(), POLLOUT, 0}, {signals_.fd(), POLLIN, 0}};
            if (::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR)
                return Failed{errno_text("poll")};
            if (fds[1].revents & POLLIN)
                if (int sig = signals_.next_quit()) return Interrupted{sig};
            if (fds[0].revents & (POLLERR | POLLHUP)) return Closed{};
        }
        return json::object();
    }

    Next read_message(Clock::time_point deadline) {
        for (;;) {
            if (auto nul = buffer_.find('\0'); nul != std::string::npos) {
                json m = json::parse(std::string_view(buffer_).substr(0, nul), nullptr, false);
                // The text held cookies or a page: not left behind in freed memory.
                std::fill(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(nul + 1), '\0');
                buffer_.erase(0, nul + 1);
                if (m.is_discarded() || !m.is_object()) return Failed{"the browser sent a DevTools message that is not JSON"};
                heard_ = true;
                return m;
            }
            if (buffer_.size() > kMaxMessage) return Failed{"the browser sent a DevTools message over 64 MiB"};
            if (eof_) return Closed{};
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return Timeout{};
            pollfd fds[2] = {{browser_.out(), POLLIN, 0}, {signals_.fd(), POLLIN, 0}};
            int r = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return Failed{errno_text("poll")};
            if (fds[1].revents & POLLIN)
                if (int s = signals_.next_quit()) return Interrupted{s};
            if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                char chunk[65536];
                ssize_t n = ::read(browser_.out(), chunk, sizeof chunk);
                if (n > 0) buffer_.append(chunk, static_cast<std::size_t>(n));
                else if (n == 0 || (errno != EAGAIN && errno != EINTR)) eof_ = true;
            }
        }
    }

    BrowserProcess& browser_;
    LoginSignals& signals_;
    std::string buffer_;
    std::deque<json> events_;
    int last_id_ = 0;
    bool eof_ = false;
    bool heard_ = false;
};

std::string host_of(std::string_view url) {
    auto scheme = url.find("://");
    if (scheme == std::string_view::npos) return {};
    auto rest = url.substr(scheme + 3);
    return std::string(rest.substr(0, rest.find_first_of("/?#")));
}

using HeaderList = std::vector<std::pair<std::string, std::string>>;

HeaderList header_list(const json& headers) {
    HeaderList out;
    if (!headers.is_object()) return out;
    for (const auto& [name, value] : headers.items())
        out.emplace_back(name, value.is_string() ? value.get<std::string>() : value.dump());
    return out;
}

const std::string* header(const HeaderList& headers, std::string_view name) {
    for (const auto& [n, v] : headers)
        if (ascii_lower(n) == name) return &v;
    return nullptr;
}

// The login in the browser: what it opened, what it waits for, what it saw so far.
class DrivenLogin {
public:
    DrivenLogin(DevTools& dt, const SsoFinish& finish, Clock::time_point deadline)
        : dt_(dt), finish_(finish), deadline_(deadline) {}

    Result<SsoResult> run(const SsoStart& start);

private:
    struct AcsCandidate {
        std::string session, url;
        HeaderList headers;
    };

    Result<json> call(const std::string& method, json params, const std::string& session = {});
    Error stopped(const DevTools::Next& n) const;
    Status attach(const std::string& target_id);
    Status handle(const json& event);
    void on_url(const std::string& session, const std::string& url);
    void on_response(const std::string& session, const std::string& request_id, const json& response,
                     bool document);
    Status check_cookies();
    Status fetch_body(const std::string& request_id);

    DevTools& dt_;
    const SsoFinish& finish_;
    Clock::time_point deadline_;
    std::set<std::string> attached_;
    std::string start_url_;
    bool navigated_ = false;
    std::map<std::string, AcsCandidate> bodies_;  // requestId -> a document whose body may hold the ACS result
    bool final_reached_ = false;
    std::string final_session_;
    std::optional<SsoResult> result_;
};

Error DrivenLogin::stopped(const DevTools::Next& n) const {
    // The caller words the timeout: it knows the configured --sso-timeout.
    if (std::holds_alternative<DevTools::Timeout>(n)) return make_error("the login in the browser did not finish in time");
    if (std::holds_alternative<DevTools::Closed>(n) && !dt_.heard())
        return make_error("the browser exited without answering on the DevTools pipe (--sso-browser wants Chromium or "
                          "Chrome, which take --remote-debugging-pipe)");
    if (std::holds_alternative<DevTools::Closed>(n)) return make_error("the browser was closed before the login finished");
    if (const auto* i = std::get_if<DevTools::Interrupted>(&n))
        return make_error(std::string("the login was interrupted (") + ::strsignal(i->signal) + ")");
    if (const auto* f = std::get_if<DevTools::Failed>(&n)) return make_error("the browser: " + f->why);
    return make_error("the browser stopped");
}

// A command the browser refused ("the browser: ..." from stopped()) is no failure of the
// login; anything else (closed, timed out, interrupted) is.
Status unless_refused(const Error& e) {
    if (e.message.rfind("the browser: ", 0) == 0) return {};
    return e;
}

Result<json> DrivenLogin::call(const std::string& method, json params, const std::string& session) {
    auto n = dt_.call(method, std::move(params), session, deadline_);
    if (auto* j = std::get_if<json>(&n)) return std::move(*j);
    return stopped(n);
}

Status DrivenLogin::attach(const std::string& target_id) {
    if (!attached_.insert(target_id).second) return {};
    auto r = call("Target.attachToTarget", {{"targetId", target_id}, {"flatten", true}});
    if (!r) return unless_refused(r.error());  // a page that went away before we attached
    std::string session = r->value("sessionId", std::string());
    if (session.empty()) return {};
    for (const char* m : {"Network.enable", "Page.enable"})
        if (auto e = call(m, json::object(), session); !e) return e.error();
    LOG_DEBUG << "DevTools: watching a page of the browser";
    if (!navigated_) {
        navigated_ = true;
        auto nav = call("Page.navigate", {{"url", start_url_}}, session);
        if (!nav) return nav.error();
        // The page shows the browser's error too; the login may still go on (a redirect to
        // globalprotectcallback: ends the navigation "aborted"), so this is only said.
        if (std::string err = nav->value("errorText", std::string()); !err.empty())
            LOG_WARN << "the browser could not open the login page: " << err;
    }
    return {};
}

void DrivenLogin::on_url(const std::string& session, const std::string& url) {
    if (finish_.gp_acs && ascii_lower(url.substr(0, 22)) == "globalprotectcallback:") {
        SsoResult r;
        r.kind = SsoResult::Kind::callback_url;
        r.url = Secret::from_string(url);
        result_ = std::move(r);
        LOG_INFO << "the browser reached the globalprotectcallback: URL";
        return;
    }
    if (!finish_.final_url.empty() && url.starts_with(finish_.final_url) && !final_reached_) {
        final_reached_ = true;
        final_session_ = session;
        LOG_INFO << "the browser reached the login's final URL (" << host_of(url) << ")";
    }
}

void DrivenLogin::on_response(const std::string& session, const std::string& request_id, const json& response,
                              bool document) {
    if (!response.is_object()) return;
    const std::string url = response.value("url", std::string());
    HeaderList headers = header_list(response.value("headers", json::object()));
    if (const std::string* location = header(headers, "location"))
        on_url(session, *location);
    if (result_ || !finish_.gp_acs) return;
    if (header(headers, "saml-auth-status")) {
        const std::string* pre = header(headers, "prelogin-cookie");
        const std::string* portal = header(headers, "portal-userauthcookie");
        if ((pre && !pre->empty()) || (portal && !portal->empty())) {
            SsoResult r;
            r.kind = SsoResult::Kind::acs_response;
            r.url = Secret::from_string(url);
            r.headers = std::move(headers);
            result_ = std::move(r);
            LOG_INFO << "the browser got the SAML result from " << host_of(url) << " (in headers)";
            return;
        }
    }
    // The result may be in a page's body (often inside an HTML comment): read it once loaded.
    if (!request_id.empty() && document) bodies_[request_id] = AcsCandidate{session, url, std::move(headers)};
}

Status DrivenLogin::fetch_body(const std::string& request_id) {
    auto it = bodies_.find(request_id);
    if (it == bodies_.end()) return {};
    AcsCandidate c = std::move(it->second);
    bodies_.erase(it);
    auto r = call("Network.getResponseBody", {{"requestId", request_id}}, c.session);
    if (!r) return unless_refused(r.error());  // no body (a redirect, evicted)
    std::string body = r->value("body", std::string());
    if (r->value("base64Encoded", false)) return {};  // not a page of text
    bool in_headers = header(c.headers, "saml-auth-status") != nullptr;
    if (!in_headers && ascii_lower(body).find("saml-auth-status") == std::string::npos) return {};
    SsoResult res;
    res.kind = SsoResult::Kind::acs_response;
    res.url = Secret::from_string(c.url);
    res.headers = std::move(c.headers);
    res.body = Secret::from_string(body);
    std::fill(body.begin(), body.end(), '\0');
    result_ = std::move(res);
    LOG_INFO << "the browser got the SAML result from " << host_of(c.url) << (in_headers ? "" : " (in the body)");
    return {};
}

Status DrivenLogin::check_cookies() {
    auto r = call("Network.getCookies", {{"urls", json::array({finish_.final_url})}}, final_session_);
    if (!r) return unless_refused(r.error());
    const json cookies = r->value("cookies", json::array());
    for (const auto& c : cookies) {
        std::string name = c.value("name", std::string());
        if (!finish_.error_cookie.empty() && name == finish_.error_cookie) {
            std::string why = c.value("value", std::string());
            // The identity provider's words, shown to the user: printable and short.
            for (char& ch : why)
                if (!std::isprint(static_cast<unsigned char>(ch))) ch = '?';
            if (why.size() > 200) why.resize(200);
            return make_error("the identity provider refused the login (cookie " + name + ": \"" + why + "\")");
        }
    }
    for (const auto& c : cookies) {
        if (c.value("name", std::string()) != finish_.token_cookie) continue;
        std::string value = c.value("value", std::string());
        if (value.empty()) continue;
        SsoResult res;
        res.kind = SsoResult::Kind::token;
        res.token = Secret::from_string(value);
        std::fill(value.begin(), value.end(), '\0');
        result_ = std::move(res);
        LOG_INFO << "the browser holds the login's token cookie " << finish_.token_cookie;
        return {};
    }
    return {};
}

Status DrivenLogin::handle(const json& e) {
    const std::string method = e.value("method", std::string());
    const std::string session = e.value("sessionId", std::string());
    const json params = e.value("params", json::object());
    if (method == "Target.targetCreated") {
        const json info = params.value("targetInfo", json::object());
        if (info.value("type", std::string()) == "page") return attach(info.value("targetId", std::string()));
    } else if (method == "Network.requestWillBeSent") {
        if (params.contains("redirectResponse")) on_response(session, "", params["redirectResponse"], true);
        if (result_) return {};
        on_url(session, params.value("request", json::object()).value("url", std::string()));
    } else if (method == "Network.responseReceived") {
        const json response = params.value("response", json::object());
        on_url(session, response.value("url", std::string()));
        // Pages (and what their scripts fetch), not images or style sheets.
        const std::string type = params.value("type", std::string());
        if (!result_)
            on_response(session, params.value("requestId", std::string()), response,
                        type == "Document" || type == "XHR" || type == "Fetch");
    } else if (method == "Network.loadingFinished") {
        return fetch_body(params.value("requestId", std::string()));
    } else if (method == "Network.loadingFailed") {
        bodies_.erase(params.value("requestId", std::string()));
    } else if (method == "Page.frameRequestedNavigation") {
        on_url(session, params.value("url", std::string()));
    } else if (method == "Page.frameNavigated") {
        on_url(session, params.value("frame", json::object()).value("url", std::string()));
    }
    return {};
}

Result<SsoResult> DrivenLogin::run(const SsoStart& start) {
    start_url_ = start.url.empty() ? "data:text/html;charset=utf-8," + http::percent_encode(start.html) : start.url;
    if (auto r = call("Target.setDiscoverTargets", {{"discover", true}}); !r) return r.error();
    auto targets = call("Target.getTargets", json::object());
    if (!targets) return targets.error();
    for (const auto& t : targets->value("targetInfos", json::array()))
        if (t.value("type", std::string()) == "page")
            if (auto s = attach(t.value("targetId", std::string())); !s) return s.error();
    if (!navigated_) {
        auto created = call("Target.createTarget", {{"url", "about:blank"}});
        if (!created) return created.error();
        if (auto s = attach(created->value("targetId", std::string())); !s) return s.error();
    }
    for (;;) {
        if (result_) return std::move(*result_);
        // Once at the final URL the token cookie may be set a moment later: look again every 250 ms.
        auto wait_until = final_reached_ ? std::min(deadline_, Clock::now() + std::chrono::milliseconds(250)) : deadline_;
        auto n = dt_.next_event(wait_until);
        if (auto* e = std::get_if<json>(&n)) {
            if (auto s = handle(*e); !s) return s.error();
        } else if (!(std::holds_alternative<DevTools::Timeout>(n) && Clock::now() < deadline_)) {
            return stopped(n);
        }
        if (final_reached_ && !result_)
            if (auto s = check_cookies(); !s) return s.error();
    }
}

class DrivenBrowser final : public session::SsoBrowser {
public:
    explicit DrivenBrowser(DrivenBrowserOptions o) : o_(std::move(o)) {}

    Result<SsoResult> run(const SsoStart& start, const SsoFinish& finish) override {
        auto split = split_command(o_.command);
        if (!split) return split.error();
        const std::vector<std::string>& command = *split;
        if (command.empty()) return make_error("--sso-browser: no command given");
        if (!finish.gp_acs && (finish.final_url.empty() || finish.token_cookie.empty()))
            return make_error("the driven browser cannot see the end of this login (it needs a final URL and a cookie "
                              "name, or a GlobalProtect ACS result)");
        auto user = invoking_user();
        if (!user) return user.error();
        LoginSignals signals{SIGINT, SIGTERM, SIGHUP, SIGPIPE};
        BrowserProcess browser;
        if (auto s = browser.start(command, *user); !s) return s.error();
        LOG_INFO << "log in to " << (start.server.empty() ? std::string("the server") : start.server)
                 << " in the browser window (waiting up to " << o_.timeout.count() << " s)";
        const auto deadline = Clock::now() + o_.timeout;
        DevTools dt(browser, signals);
        DrivenLogin login(dt, finish, deadline);
        auto result = login.run(start);
        if (!result && result.error().message == "the login in the browser did not finish in time")
            result = make_error("the login in the browser did not finish within " + std::to_string(o_.timeout.count()) +
                                " s (--sso-timeout)");
        dt.send_close();
        browser.stop(o_.close_grace);
        return result;
    }
    bool sees_responses() const override { return true; }
    bool sees_callbacks() const override { return false; }

private:
    DrivenBrowserOptions o_;
};

}  // namespace

std::unique_ptr<session::SsoBrowser> make_driven_browser(DrivenBrowserOptions options) {
    return std::make_unique<DrivenBrowser>(std::move(options));
}

}  // namespace espvpn::sso
