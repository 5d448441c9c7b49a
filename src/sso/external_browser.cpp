#include "src/sso/external_browser.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "protocols/gp/saml.h"
#include "src/log/logger.h"
#include "src/sso/browser_launcher.h"
#include "src/sso/callback_socket.h"
#include "src/sso/invoking_user.h"
#include "src/io/owned_file.h"
#include "src/io/udp_socket.h"
#include "src/io/unique_fd.h"
#include "src/sso/login_signals.h"
#include "src/sso/loopback_peer.h"

namespace espvpn::sso {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

// A private copy of an HTML page (GP saml-auth-method POST) the user's browser can open.
// The directory is handed to the user by its descriptor and the page made as the user (this
// thread's filesystem ids): nothing is chowned by path. Removed as the user too.
class PageFile {
public:
    ~PageFile() {
        if (dir_.empty()) return;
        io::FsIdentity as_user(uid_, gid_);
        if (!file_.empty()) ::unlink(file_.c_str());
        ::rmdir(dir_.c_str());
    }
    Result<std::string> write(const std::string& html, const InvokingUser& user) {
        uid_ = user.uid;
        gid_ = user.gid;
        const char* tmp = std::getenv("TMPDIR");
        auto dir = io::make_private_dir_for(std::string(tmp && *tmp ? tmp : "/tmp") + "/espvpn-sso-XXXXXX", uid_, gid_);
        if (!dir) return make_error("cannot make a directory for the IdP form: " + dir.error().message);
        dir_ = *dir;
        file_ = dir_ + "/login.html";
        io::FsIdentity as_user(uid_, gid_);
        if (as_user.failed()) return make_error("cannot act as " + user.name + " to write the IdP form");
        io::UniqueFd fd(::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
        if (fd.get() < 0) return make_error("cannot write the IdP form: " + errno_text());
        std::size_t off = 0;
        while (off < html.size()) {
            ssize_t n = ::write(fd.get(), html.data() + off, html.size() - off);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return make_error("cannot write the IdP form: " + errno_text());
            off += static_cast<std::size_t>(n);
        }
        return file_;
    }

private:
    std::string dir_, file_;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
};

// AnyConnect's external-browser end: http://localhost:PORT/api/sso/<token>. Another local
// user must neither receive the token (by holding the port on one of the two loopback
// addresses) nor hand espvpn a token of theirs (login CSRF): both addresses are bound or
// none, and a connection is served only when its socket is the invoking user's (or root's).
class LoopbackListener {
public:
    Status open(std::uint16_t port, uid_t owner) {
        owner_ = owner;
        for (const char* host : {"127.0.0.1", "::1"}) {
            const int err = listen_on(io::SocketAddress::parse(io::endpoint_text(host, port)).value());
            // A host without that family on loopback (no IPv6) leaves nothing to take over.
            if (err == 0 || err == EAFNOSUPPORT || err == EADDRNOTAVAIL) continue;
            std::string msg = "cannot listen on " + std::string(host) + " port " + std::to_string(port) +
                              " for the browser's return: " + std::strerror(err);
            if (err == EADDRINUSE) {
                const std::string holder = tcp_port_holder(port);
                msg += std::string("; it is held by ") + (holder.empty() ? "another program" : holder) +
                       ", which would be handed the login token: stop it and try again";
            }
            return make_error(msg);
        }
        if (fds_.empty())
            return make_error("cannot listen on localhost port " + std::to_string(port) +
                              " for the browser's return: no loopback address");
        return {};
    }
    const std::vector<io::UniqueFd>& fds() const { return fds_; }

    // One request on a ready listener: the token, or nothing (answered 404; keep waiting).
    std::optional<Secret> take(int listen_fd) {
        io::UniqueFd conn(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (conn.get() < 0) return std::nullopt;
        std::string head;
        char buf[2048];
        auto until = Clock::now() + std::chrono::seconds(3);
        while (head.size() < 16384 && head.find("\r\n\r\n") == std::string::npos && Clock::now() < until) {
            pollfd p{conn.get(), POLLIN, 0};
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
            if (::poll(&p, 1, static_cast<int>(std::max<long>(left, 0))) <= 0) break;
            ssize_t n = ::read(conn.get(), buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) break;
            head.append(buf, static_cast<std::size_t>(n));
        }
        std::optional<Secret> token;
        const std::string prefix = "GET /api/sso/";
        const auto peer = loopback_peer_uid(conn.get());
        const bool allowed = peer && (*peer == owner_ || *peer == 0);
        if (!allowed) {
            LOG_WARN << "refused a connection to the single sign-on port from "
                     << (peer ? "uid " + std::to_string(*peer) : std::string("a process whose user is unknown"))
                     << " (this login is uid " << owner_ << "'s)";
        } else if (head.rfind(prefix, 0) == 0) {
            auto end = head.find_first_of(" ?\r\n", prefix.size());
            std::string raw = head.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
            std::string decoded = percent_decode(raw);
            if (!decoded.empty()) token = Secret::from_string(decoded);
            secure_zero(raw.data(), raw.size());
            secure_zero(decoded.data(), decoded.size());
        }
        secure_zero(head.data(), head.size());
        static const std::string done_page =
            "<!DOCTYPE html><html><head><title>espvpn</title></head><body><p>Login finished: espvpn is "
            "connecting. You can close this window.</p></body></html>";
        static const std::string missing = "<!DOCTYPE html><html><body><p>Not found.</p></body></html>";
        static const std::string refused = "<!DOCTYPE html><html><body><p>Forbidden.</p></body></html>";
        const std::string& page = token ? done_page : allowed ? missing : refused;
        std::string reply = std::string(token ? "HTTP/1.1 200 OK" : allowed ? "HTTP/1.1 404 Not Found" : "HTTP/1.1 403 Forbidden") +
                            "\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n"
                            "Connection: close\r\nContent-Length: " + std::to_string(page.size()) + "\r\n\r\n" + page;
        pollfd p{conn.get(), POLLOUT, 0};
        if (::poll(&p, 1, 2000) > 0) (void)!::send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
        return token;
    }

private:
    // Adds a listener on `address`: 0, or the errno of the socket, bind or listen that failed.
    int listen_on(const io::SocketAddress& address) {
        io::UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd.valid()) return errno;
        int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (address.family() == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0 ||
            ::listen(fd.get(), 8) != 0)
            return errno;
        fds_.push_back(std::move(fd));
        return 0;
    }
    static std::string percent_decode(const std::string& s) {
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
                out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
                i += 2;
            } else {
                out += s[i];
            }
        }
        return out;
    }
    std::vector<io::UniqueFd> fds_;
    uid_t owner_ = 0;
};

// Lines typed or pasted on stdin.
class StdinLines {
public:
    explicit StdinLines(bool on) : on_(on) {}
    ~StdinLines() { secure_zero(buf_.data(), buf_.size()); }
    bool on() const { return on_; }
    // After poll said readable: the next complete line, if any (EOF: off from then on).
    std::optional<Secret> read_line() {
        char chunk[4096];
        ssize_t n = ::read(0, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return next();
        if (n <= 0) {
            on_ = false;
            if (!buf_.empty()) {
                buf_ += '\n';
                return next();
            }
            return std::nullopt;
        }
        buf_.append(chunk, static_cast<std::size_t>(n));
        secure_zero(chunk, sizeof chunk);
        if (buf_.size() > 256 * 1024) {
            secure_zero(buf_.data(), buf_.size());
            buf_.clear();
        }
        return next();
    }
    std::optional<Secret> next() {
        auto nl = buf_.find('\n');
        if (nl == std::string::npos) return std::nullopt;
        std::string line = buf_.substr(0, nl);
        secure_zero(buf_.data(), nl + 1);
        buf_.erase(0, nl + 1);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        std::size_t lead = line.find_first_not_of(" \t");
        Secret s = Secret::from_string(lead == std::string::npos ? std::string_view() : std::string_view(line).substr(lead));
        secure_zero(line.data(), line.size());
        return s;
    }

private:
    bool on_;
    std::string buf_;
};

// What a pasted line or handed-over URL yields for a GP login; why not, otherwise.
Status check_gp_callback(const Secret& url) {
    auto text = url.reveal_text();
    if (text.rfind("globalprotectcallback:", 0) != 0) return make_error("not a globalprotectcallback: URL");
    auto parsed = gp::parse_globalprotect_callback(text);
    if (!parsed) return make_error("its data does not parse (" + parsed.error().message + ")");
    return {};
}

// AnyConnect, pasted: the final URL (…/api/sso/<token>) or the token itself.
Secret token_from_line(const Secret& line) {
    auto text = line.reveal_text();
    auto at = text.find("/api/sso/");
    if (at == std::string_view::npos) return line.clone();
    auto token = text.substr(at + 9);
    token = token.substr(0, token.find_first_of("?# "));
    return Secret::from_string(token);
}

class ExternalBrowser final : public session::SsoBrowser {
public:
    explicit ExternalBrowser(ExternalBrowserOptions o) : options_(std::move(o)) {}

    bool sees_responses() const override { return false; }
    bool sees_callbacks() const override { return true; }

    Result<session::SsoResult> run(const session::SsoStart& start, const session::SsoFinish& finish) override;

private:
    ExternalBrowserOptions options_;
};

Result<session::SsoResult> ExternalBrowser::run(const session::SsoStart& start, const session::SsoFinish& finish) {
    if (!finish.gp_acs && finish.loopback_port == 0)
        return make_error("the external browser cannot see how this login ends (it needs a globalprotectcallback: "
                          "redirect or a localhost return); use --sso-browser");
    auto user = invoking_user();
    if (!user) return user.error();
    const std::string who = start.server.empty() ? std::string("the server") : start.server;

    std::optional<CallbackListener> callbacks;
    if (finish.gp_acs) {
        auto l = CallbackListener::open(*user);
        if (!l) return l.error();
        callbacks.emplace(std::move(*l));
        LOG_DEBUG << "waiting for the globalprotectcallback: handler on " << callbacks->path();
    }
    LoopbackListener loopback;
    if (finish.loopback_port != 0) {
        if (auto st = loopback.open(finish.loopback_port, user->uid); !st) return st.error();
        LOG_DEBUG << "waiting for the browser's return on localhost port " << finish.loopback_port;
    }
    LoginSignals signals{SIGINT, SIGTERM};
    StdinLines input(options_.read_stdin && ::fcntl(0, F_GETFL) >= 0);

    // What the browser opens: the URL, or for an HTML form a private file of it.
    PageFile page;
    std::string target = start.url;
    if (target.empty()) {
        if (start.html.empty()) return make_error("nothing to open for the single sign-on at " + who);
        auto file = page.write(start.html, *user);
        if (!file) return file.error();
        target = *file;
    }
    std::string program = options_.program;
    bool launch = options_.start_browser;
    if (program.empty()) {
        if (!user->has_display() || user->is_root_alone) launch = false;
        else program = "xdg-open";
    }
    if (launch) {
        LOG_INFO << "single sign-on at " << who << ": opening the identity provider in " << program << " as "
                 << user->name;
        // Through the launcher when the session has one (it is under a seccomp filter the
        // browser could not start in): the same program, the same user.
        if (auto st = has_browser_launcher() ? launch_browser(target) : start_as_user(*user, program, target); !st) {
            LOG_WARN << st.error().message << "; open the page yourself";
            launch = false;
        } else {
            LOG_INFO << "if no browser window opens, open " << target;
        }
    }
    if (!launch) {
        // The URL is the identity provider's login page: no secret in it.
        std::string msg = "Single sign-on required by " + who + ". Open this " +
                          (start.url.empty() ? "file (the identity provider's form)" : "URL") +
                          " in a browser:\n  " + target + "\n";
        if (finish.gp_acs)
            msg += "When the browser hands the globalprotectcallback: link to espvpn-sso-callback, the login goes on";
        else
            msg += "When the browser is sent back to localhost:" + std::to_string(finish.loopback_port) +
                   ", the login goes on";
        if (input.on()) msg += finish.gp_acs ? "; or paste the globalprotectcallback: URL here" : "; or paste the final URL here";
        msg += ".\n";
        std::fputs(msg.c_str(), stderr);
        std::fflush(stderr);
    }

    const auto deadline = Clock::now() + options_.timeout;
    session::SsoResult result;
    auto take_gp = [&](Secret url) -> Status {
        if (auto st = check_gp_callback(url); !st) return st;
        result.kind = session::SsoResult::Kind::callback_url;
        result.url = std::move(url);
        return {};
    };
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0)
            return make_error("single sign-on at " + who + " not finished within " +
                              std::to_string(options_.timeout.count()) + " s (--sso-timeout)");
        std::vector<pollfd> fds;
        fds.push_back({signals.fd(), POLLIN, 0});
        if (callbacks) fds.push_back({callbacks->fd(), POLLIN, 0});
        const std::size_t loop_at = fds.size();
        for (const auto& l : loopback.fds()) fds.push_back({l.get(), POLLIN, 0});
        const std::size_t stdin_at = fds.size();
        if (input.on()) fds.push_back({0, POLLIN, 0});
        int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 60000)));
        if (r < 0 && errno != EINTR) return make_error("poll: " + errno_text());
        if (r <= 0) continue;
        if (fds[0].revents) {
            int sig = signals.next_quit();
            if (sig) return make_error(std::string("single sign-on at ") + who + " cancelled (" +
                                       (sig == SIGINT ? "SIGINT" : "SIGTERM") + ")");
        }
        if (callbacks && fds[1].revents) {
            auto call = callbacks->accept_call();
            if (call && !call->peer_allowed) {
                LOG_WARN << "refused a single sign-on callback from uid " << call->peer << " (this login is "
                         << user->name << "'s)";
                CallbackListener::reply(*call, "refused: this login belongs to another user");
            } else if (call) {
                if (auto st = take_gp(std::move(call->data)); !st) {
                    LOG_WARN << "refused a single sign-on callback: " << st.error().message;
                    CallbackListener::reply(*call, "refused: " + st.error().message);
                } else {
                    CallbackListener::reply(*call, "ok");
                    LOG_INFO << "single sign-on at " << who << ": callback received from the browser";
                    return result;
                }
            }
        }
        for (std::size_t i = loop_at; i < stdin_at; ++i) {
            if (!fds[i].revents) continue;
            if (auto token = loopback.take(fds[i].fd)) {
                result.kind = session::SsoResult::Kind::token;
                result.token = std::move(*token);
                LOG_INFO << "single sign-on at " << who << ": the browser came back with the token";
                return result;
            }
        }
        if (input.on() && stdin_at < fds.size() && fds[stdin_at].revents) {
            for (auto line = input.read_line(); line; line = input.next()) {
                if (line->empty()) continue;
                if (finish.gp_acs) {
                    if (auto st = take_gp(std::move(*line)); !st) {
                        std::fputs(("espvpn: that line is not usable: " + st.error().message +
                                    "; paste the whole globalprotectcallback: URL\n").c_str(), stderr);
                        continue;
                    }
                    LOG_INFO << "single sign-on at " << who << ": callback URL read from stdin";
                    return result;
                }
                result.kind = session::SsoResult::Kind::token;
                result.token = token_from_line(*line);
                if (result.token.empty()) continue;
                LOG_INFO << "single sign-on at " << who << ": token read from stdin";
                return result;
            }
        }
    }
}

}  // namespace

std::unique_ptr<session::SsoBrowser> make_external_browser(ExternalBrowserOptions options) {
    return std::make_unique<ExternalBrowser>(std::move(options));
}

}  // namespace espvpn::sso
