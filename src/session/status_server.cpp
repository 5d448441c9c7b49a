#include "src/session/status_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/log/logger.h"

namespace espvpn::session {

using status::Request;
using status::State;

bool status_allowed(const StatusAccess& access, const io::PeerCredentials& peer, uid_t self) {
    if (peer.uid == 0 || peer.uid == self) return true;
    if (std::find(access.users.begin(), access.users.end(), peer.uid) != access.users.end()) return true;
    for (gid_t g : access.groups) {
        if (peer.gid == g) return true;
        if (std::find(peer.groups.begin(), peer.groups.end(), g) != peer.groups.end()) return true;
    }
    return false;
}

// --- StatusBoard ------------------------------------------------------------

namespace {
std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(StatusBoard::Clock::now().time_since_epoch()).count();
}
}  // namespace

StatusBoard::StatusBoard(status::Snapshot initial) : s_(std::move(initial)) {
    if (s_.since == 0) s_.since = unix_now();
}

void StatusBoard::set_state(State state, const std::string& error) {
    std::lock_guard lock(mu_);
    if (s_.state != state) s_.since = unix_now();
    s_.state = state;
    if (state != State::captive_portal) s_.portal.clear();
    if (!error.empty()) s_.last_error = error;
}

void StatusBoard::set_portal(const std::string& url) {
    std::lock_guard lock(mu_);
    s_.portal = url;
}

void StatusBoard::set_error(const std::string& error) {
    std::lock_guard lock(mu_);
    s_.last_error = error;
}

void StatusBoard::set_gateway(const std::string& gateway) {
    std::lock_guard lock(mu_);
    s_.gateway = gateway;
}

void StatusBoard::set_link(int ifindex, std::string interface_name, std::function<std::string()> transport) {
    std::lock_guard lock(mu_);
    ifindex_ = ifindex;
    s_.interface_name = std::move(interface_name);
    transport_ = std::move(transport);
}

void StatusBoard::set_expires(std::int64_t unix_time) {
    std::lock_guard lock(mu_);
    s_.expires = unix_time;
}

status::Snapshot StatusBoard::snapshot() const {
    status::Snapshot s;
    {
        // The transport function is the session's while the lock is held (set_link clears it).
        std::lock_guard lock(mu_);
        s = s_;
        s.transport = transport_ && s.state == State::connected ? transport_() : std::string();
    }
    // The tun's counters outside the lock: the control loop never waits for a file read.
    if (!s.interface_name.empty()) {
        const io::ByteCounts c = io::interface_byte_counts(s.interface_name);
        s.bytes_in = c.rx;   // what the tunnel wrote into the tun
        s.bytes_out = c.tx;  // what the host sent into the tunnel
    }
    return s;
}

State StatusBoard::state() const {
    std::lock_guard lock(mu_);
    return s_.state;
}

// --- StatusServer -----------------------------------------------------------

StatusServer::StatusServer(io::UniqueFd listener, StatusAccess access, StatusBoard& board)
    : listener_(std::move(listener)), access_(std::move(access)), board_(board) {}

Result<std::unique_ptr<StatusServer>> StatusServer::start(io::UniqueFd listener, StatusAccess access,
                                                          StatusBoard& board) {
    if (!listener.valid()) return make_error("status socket: no listening socket");
    std::unique_ptr<StatusServer> s(new StatusServer(std::move(listener), std::move(access), board));
    // The thread inherits a mask blocking every signal: they stay the control loop's (signalfd).
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    s->thread_ = std::thread([p = s.get()] { p->run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return s;
}

StatusServer::~StatusServer() {
    stop_.cancel();
    if (thread_.joinable()) thread_.join();
}

std::vector<Request> StatusServer::take_commands() {
    std::uint64_t n;
    [[maybe_unused]] auto r = ::read(commands_.fd(), &n, sizeof n);  // reset the eventfd
    std::lock_guard lock(mu_);
    return std::exchange(pending_, {});
}

StatusServer::Counters StatusServer::counters() const {
    std::lock_guard lock(mu_);
    return counters_;
}

void StatusServer::run() {
    using SteadyClock = std::chrono::steady_clock;
    std::vector<pollfd> p;
    for (;;) {
        p.clear();
        p.push_back({stop_.fd(), POLLIN, 0});
        p.push_back({listener_.get(), POLLIN, 0});
        for (const Client& c : clients_)
            p.push_back({c.fd.get(), static_cast<short>((c.closing ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
        // Woken at least every second for the idle check.
        if (::poll(p.data(), p.size(), 1000) < 0 && errno != EINTR) {
            LOG_WARN << "status socket: poll: " << std::strerror(errno) << "; the status server stops";
            return;
        }
        if (p[0].revents) return;
        const auto now = SteadyClock::now();
        std::vector<bool> drop(clients_.size(), false);
        for (std::size_t i = 0; i < clients_.size(); ++i) {
            Client& c = clients_[i];
            const short ev = p[i + 2].revents;
            if ((ev & POLLIN) && !read_client(c)) drop[i] = true;
            if (!drop[i] && (ev & (POLLOUT | POLLHUP | POLLERR)) && !write_client(c)) drop[i] = true;
            if (!drop[i] && c.closing && c.out.empty()) drop[i] = true;
            if (!drop[i] && now - c.last > kIdle) {
                drop[i] = true;
                std::lock_guard lock(mu_);
                ++counters_.idle;
            }
        }
        std::size_t k = 0;
        for (std::size_t i = 0; i < clients_.size(); ++i) {
            if (drop[i]) continue;
            if (k != i) clients_[k] = std::move(clients_[i]);  // never a self-move: it may empty the buffers
            ++k;
        }
        clients_.resize(k);
        if (p[1].revents & POLLIN) accept_clients();
    }
}

void StatusServer::accept_clients() {
    // At most a few per turn: a flood of connections cannot keep the loop from its clients.
    for (int n = 0; n < 8; ++n) {
        io::UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd.valid()) return;
        auto peer = io::peer_credentials(fd.get());
        if (!peer || !status_allowed(access_, *peer, ::geteuid())) {
            bool first;
            {
                std::lock_guard lock(mu_);
                first = counters_.refused++ == 0;
            }
            const std::string line = status::error_reply("permission denied");
            [[maybe_unused]] auto w = ::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (first || log::enabled(log::Level::debug))
                log::Line(first ? log::Level::info : log::Level::debug)
                    << "status socket: refused a client (uid " << (peer ? std::to_string(peer->uid) : "?")
                    << ", pid " << (peer ? std::to_string(peer->pid) : "?")
                    << "): not root, this session's user or one of its status users/groups";
            continue;
        }
        if (clients_.size() >= kMaxClients) {
            const std::string line = status::error_reply("busy: too many status clients");
            [[maybe_unused]] auto w = ::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            std::lock_guard lock(mu_);
            ++counters_.full;
            continue;
        }
        {
            std::lock_guard lock(mu_);
            ++counters_.accepted;
        }
        clients_.push_back({std::move(fd), {}, {}, std::chrono::steady_clock::now(), false});
    }
}

bool StatusServer::read_client(Client& c) {
    char buf[4096];
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return !c.out.empty() && (c.closing = true);  // the client is done: send what is left
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    c.in.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; !c.closing && (nl = c.in.find('\n', start)) != std::string::npos; start = nl + 1) {
        handle(c, std::string_view(c.in).substr(start, nl - start));
        c.last = std::chrono::steady_clock::now();
    }
    c.in.erase(0, start);
    if (!c.closing && c.in.size() > status::kMaxRequestLine) {
        // Refused, and no more read from it: a megabyte without a newline costs one buffer.
        c.out += status::error_reply("request line too long");
        c.in.clear();
        c.closing = true;
        std::lock_guard lock(mu_);
        ++counters_.too_long;
    }
    if (c.out.size() > kMaxPending) {
        std::lock_guard lock(mu_);
        ++counters_.unread;
        return false;
    }
    return write_client(c);
}

bool StatusServer::write_client(Client& c) {
    while (!c.out.empty()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) return errno == EAGAIN || errno == EINTR;
        c.out.erase(0, static_cast<std::size_t>(n));
    }
    return true;
}

void StatusServer::handle(Client& c, std::string_view line) {
    auto request = status::parse_request(line);
    if (!request) {
        c.out += status::error_reply(request.error().message);
        return;
    }
    switch (*request) {
        case Request::status: c.out += status::status_reply(board_.snapshot()); return;
        case Request::disconnect: c.out += status::ok_reply("disconnecting"); break;
        case Request::reconnect: c.out += status::ok_reply("reconnecting"); break;
    }
    {
        std::lock_guard lock(mu_);
        if (pending_.size() < 16) pending_.push_back(*request);
    }
    commands_.cancel();
}

}  // namespace espvpn::session
