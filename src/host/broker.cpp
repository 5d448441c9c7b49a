#include "src/host/broker.h"

#include <linux/capability.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <csignal>
#include <cstring>

#include "crypto/secret.h"
#include "protocols/broker/broker_message.h"
#include "src/io/dns_socket.h"
#include "src/io/owned_file.h"
#include "src/io/seqpacket.h"
#include "src/io/state_files.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"
#include "src/sandbox/capabilities.h"

namespace espvpn::host {

namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};

std::string os_error(const std::string& what) { return what + ": " + std::strerror(errno); }

bool state_name_ok(std::string_view name) {
    if (name.empty() || name.size() > 128 || name == "." || name == "..") return false;
    for (char c : name) {
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

// A state file for the session: opened O_NOFOLLOW (a symlink at the name is refused), a
// regular file of at most kMaxStateBytes; found=false when nothing is there.
broker::StateReply read_state_file(const std::string& path) {
    broker::StateReply r{broker::Type::read_state, true, "", false, 0, 0, 0, {}};
    auto fail = [&](std::string why) {
        r.ok = false;
        r.error = std::move(why);
        return r;
    };
    auto at = io::open_parent(path);
    if (!at) return fail(at.error().message);
    io::UniqueFd fd(::openat(at->dir.get(), at->name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) return errno == ENOENT ? r : fail(os_error(path));
    struct stat st{};
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail(path + ": not a regular file");
    if (static_cast<std::size_t>(st.st_size) > broker::kMaxStateBytes) return fail(path + ": too large");
    r.data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < r.data.size()) {
        const ssize_t n = ::pread(fd.get(), r.data.data() + got, r.data.size() - got, static_cast<off_t>(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    r.data.resize(got);
    r.found = true;
    r.uid = st.st_uid;
    r.gid = st.st_gid;
    r.mode = st.st_mode & 07777;
    return r;
}

class Broker {
public:
    Broker(io::UniqueFd requests, io::UniqueFd events, pid_t session, const BrokerOptions& o)
        : requests_(std::move(requests)), events_(std::move(events)), session_(session), o_(o), host_(o.host) {}

    SessionEnd run();

private:
    void serve(const io::Packet& packet);
    void answer(const broker::Message& m, int fd = -1);
    void reply(broker::Type to, const Status& s, std::string text = {}, std::vector<std::uint8_t> data = {}, int fd = -1);
    void on_signal(const signalfd_siginfo& si);
    bool reap(int flags);
    void done_binding();
    Status open_dns_listener(const broker::OpenDnsListener& l);

    io::UniqueFd requests_, events_;
    pid_t session_;
    const BrokerOptions& o_;
    TunnelHost host_;
    broker::BrokerState state_;
    bool may_bind_ = true;
    // The domain split's DNS forwarder socket, bound once (port 53 needs CAP_NET_BIND_SERVICE,
    // dropped right after) and kept for every later session on the same tunnel address.
    io::UniqueFd dns_listener_;
    std::string dns_listener_address_;
    std::optional<SessionEnd> end_;
    // A captive portal's exception through the held kill switch: when it closes, on this
    // process's own clock (the session's word is not needed for it to end).
    std::optional<std::chrono::steady_clock::time_point> captive_until_;
    void close_captive(const char* why);
    int poll_timeout_ms() const;
};

void Broker::answer(const broker::Message& m, int fd) {
    std::vector<std::uint8_t> wire = broker::encode(m);
    if (Status s = io::send_packet(requests_.get(), wire, fd); !s)
        LOG_DEBUG << "broker: answer not sent: " << s.error().message;
    secure_zero(wire.data(), wire.size());  // a state reply carries a cookie cache's bytes
}

void Broker::close_captive(const char* why) {
    if (!captive_until_) return;
    captive_until_.reset();
    host_.close_captive_exception();
    LOG_INFO << "captive portal: the kill switch's exception is closed (" << why << ")";
}

int Broker::poll_timeout_ms() const {
    if (!captive_until_) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*captive_until_ -
                                                                            std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<long long>(left.count() + 1, 0, 60000));
}

void Broker::reply(broker::Type to, const Status& s, std::string text, std::vector<std::uint8_t> data, int fd) {
    broker::Reply r;
    r.to = to;
    r.ok = s.ok();
    r.text = s.ok() ? std::move(text) : s.error().message.substr(0, 4000);
    r.count = static_cast<std::uint32_t>(host_.domain_route_count());
    r.data = std::move(data);
    answer(r, s.ok() ? fd : -1);
}

void Broker::done_binding() {
    if (!may_bind_) return;
    may_bind_ = false;
    if (geteuid() != 0) return;  // not the split (a unit test): nothing was kept
    // CAP_NET_BIND_SERVICE out of every set, the bounding set included, then CAP_SETPCAP
    // (kept for that drop): CAP_NET_ADMIN alone is left.
    for (int cap : {CAP_NET_BIND_SERVICE, CAP_SETPCAP})
        if (Status s = sandbox::drop_capability(cap); !s) LOG_WARN << "broker: " << s.error().message;
}

Status Broker::open_dns_listener(const broker::OpenDnsListener& l) {
    // Only the domain split's forwarder: on the tun's own IPv4 address, port 53, bound once.
    if (!state_.up() || host_.tun().fd() < 0) return make_error("the DNS forwarder socket is opened after the tun is up");
    if (l.port != 53) return make_error("the DNS forwarder listens on port 53 only");
    // Bound to an address, not a device: a later tunnel's tun is another device.
    if (!l.device.empty()) return make_error("the DNS forwarder socket is bound to no device");
    if (dns_listener_.valid()) {
        // --always-on's next session: the socket bound for the first one, when its tunnel
        // has the same address (the broker can bind port 53 no more). Datagrams that queued
        // up meanwhile are discarded, never looked at: those clients have given up.
        if (l.address != dns_listener_address_)
            return make_error("the DNS forwarder's port 53 stays bound to " + dns_listener_address_ +
                              " (the first tunnel's address) and cannot be bound again on " + l.address);
        char drop[512];
        for (int i = 0; i < 4096 && ::recv(dns_listener_.get(), drop, sizeof drop, MSG_DONTWAIT) >= 0; ++i) {
        }
        return {};
    }
    if (!may_bind_) return make_error("the broker can no longer bind port 53 (no wildcard split domain in the first tunnel)");
    auto fd = host_.open_dns_listener(l.address, l.port, l.device);
    done_binding();
    if (!fd) return fd.error();
    dns_listener_ = std::move(*fd);
    dns_listener_address_ = l.address;
    return {};
}

void Broker::serve(const io::Packet& packet) {
    auto decoded = broker::decode(packet.bytes);
    if (!decoded) {
        LOG_WARN << "broker: refused a request: " << decoded.error().message;
        reply(broker::Type::tear_down, decoded.error());
        return;
    }
    const broker::Message& m = *decoded;
    const broker::Type type = broker::type_of(m);
    if (Status admitted = state_.admit(type); !admitted) {
        LOG_WARN << "broker: " << admitted.error().message;
        if (type == broker::Type::bring_up) answer(broker::TunReply{false, admitted.error().message, "", 0, false, 0, false, 0});
        else reply(type == broker::Type::reply || type == broker::Type::tun_reply || type == broker::Type::state_reply ||
                           type == broker::Type::signal_event
                       ? broker::Type::tear_down : type,
                   admitted.error());
        return;
    }
    if (const auto* b = std::get_if<broker::BringUp>(&m)) {
        close_captive("a tunnel is being brought up");
        std::vector<KillSwitchService> servers;
        for (const auto& s : b->login_servers) servers.push_back({s.address, s.port});
        host_.set_login_servers(std::move(servers));
        Status s = host_.bring_up(b->config, b->mtu);
        state_.after(type, s.ok());
        if (!s) {
            host_.tear_down();
            answer(broker::TunReply{false, s.error().message.substr(0, 4000), "", 0, false, 0, false, 0});
            return;
        }
        bool wildcard = false;
        for (const auto* list : {&b->config.split_include_domains, &b->config.split_exclude_domains})
            for (const auto& d : *list) wildcard = wildcard || d.wildcard;
        if (!wildcard || !host_.domain_routes_possible()) done_binding();  // no forwarder will be asked for
        io::TunDevice& tun = host_.tun();
        broker::TunReply t{true, "", tun.name(), tun.ifindex(), tun.offloads().vnet_hdr, tun.offloads().flags,
                           host_.domain_routes_possible(), host_.mtu()};
        answer(t, tun.fd());
        if (o_.detach_when_up) setsid();  // -b: the terminal's Ctrl-C is for the waiting command now
        return;
    }
    if (const auto* r = std::get_if<broker::RunScript>(&m)) {
        host_.run_script(static_cast<ScriptReason>(r->reason));
        reply(type, {});
    } else if (const auto* q = std::get_if<broker::QueueScript>(&m)) {
        host_.queue_script(static_cast<ScriptReason>(q->reason));
        reply(type, {});
    } else if (const auto* t = std::get_if<broker::TearDown>(&m)) {
        if (t->hold_kill_switch) host_.tear_down_holding_kill_switch();
        else host_.tear_down();
        state_.after(type, true, host_.holds_kill_switch());
        reply(type, {});
    } else if (const auto* ps = std::get_if<broker::OpenProbeSocket>(&m)) {
        auto fd = host_.open_probe_socket(ps->family);
        reply(type, fd ? Status{} : Status(fd.error()), {}, {}, fd ? fd->get() : -1);
    } else if (const auto* c = std::get_if<broker::OpenCaptiveException>(&m)) {
        state_.after(type, true);  // once per captive portal, whatever comes of it
        auto opened = host_.open_captive_exception(c->seconds);
        if (opened) {
            captive_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(c->seconds);
            LOG_INFO << "captive portal: the kill switch lets through " << *opened;
        }
        reply(type, opened ? Status{} : Status(opened.error()), opened ? *opened : std::string());
    } else if (const auto* a = std::get_if<broker::AddDomainRoute>(&m)) {
        auto done = host_.add_domain_route(a->address, a->include);
        reply(type, done ? Status{} : Status(done.error()), done ? *done : std::string());
    } else if (const auto* d = std::get_if<broker::RemoveDomainRoute>(&m)) {
        host_.remove_domain_route(d->address, d->include);
        reply(type, {});
    } else if (const auto* p = std::get_if<broker::PointDnsAt>(&m)) {
        reply(type, host_.point_dns_at(p->forwarder));
    } else if (const auto* mtu = std::get_if<broker::SetMtu>(&m)) {
        reply(type, host_.tun().set_mtu(static_cast<unsigned>(mtu->mtu)));
    } else if (const auto* u = std::get_if<broker::OpenUdp>(&m)) {
        auto fd = io::open_udp_fd(u->family, u->send_buffer, u->receive_buffer);
        reply(type, fd ? Status{} : Status(fd.error()), {}, {}, fd ? fd->get() : -1);
    } else if (const auto* l = std::get_if<broker::OpenDnsListener>(&m)) {
        const Status opened = open_dns_listener(*l);
        reply(type, opened, {}, {}, dns_listener_.get());
    } else if (const auto* rs = std::get_if<broker::ReadState>(&m)) {
        if (!state_path_allowed(o_, rs->path))
            return answer(broker::StateReply{type, false, rs->path + ": not a state file of this run", false, 0, 0, 0, {}});
        broker::StateReply r = read_state_file(rs->path);
        answer(r);
        secure_zero(r.data.data(), r.data.size());
    } else if (const auto* ws = std::get_if<broker::WriteState>(&m)) {
        if (!state_path_allowed(o_, ws->path)) return reply(type, make_error(ws->path + ": not a state file of this run"));
        // io::LocalStateFiles' rules: O_NOFOLLOW, a new file by rename, as the file's owner
        // (the broker has no CAP_SETUID: a file not root's is refused, never written as root).
        io::LocalStateFiles local;
        const std::string_view bytes(reinterpret_cast<const char*>(ws->bytes.data()), ws->bytes.size());
        const Status written = local.write(ws->path, bytes, ws->sync ? io::Sync::yes : io::Sync::no,
                                           static_cast<mode_t>(ws->mode));
        secure_zero(const_cast<std::uint8_t*>(ws->bytes.data()), ws->bytes.size());  // decoded: this request's own copy
        reply(type, written);
    } else if (const auto* rm = std::get_if<broker::RemoveState>(&m)) {
        broker::StateReply r{type, true, "", false, 0, 0, 0, {}};
        auto at = state_path_allowed(o_, rm->path) ? io::open_parent(rm->path)
                                                  : Result<io::PathAt>(make_error(rm->path + ": not a state file of this run"));
        if (!at) {
            r.ok = false;
            r.error = at.error().message;
        } else if (unlinkat(at->dir.get(), at->name.c_str(), 0) == 0) {
            r.found = true;
        } else if (errno != ENOENT) {
            r.ok = false;
            r.error = os_error(rm->path);
        }
        answer(r);
    }
}

bool Broker::reap(int flags) {
    int status = 0;
    pid_t got;
    while ((got = waitpid(session_, &status, flags)) < 0 && errno == EINTR) {
    }
    if (got != session_) return false;
    SessionEnd e;
    e.exited = WIFEXITED(status);
    e.code = e.exited ? WEXITSTATUS(status) : 0;
    e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    end_ = e;
    return true;
}

void Broker::on_signal(const signalfd_siginfo& si) {
    const int signo = static_cast<int>(si.ssi_signo);
    if (signo == SIGCHLD) {
        reap(WNOHANG);
        return;
    }
    // The terminal sends its signals to the whole foreground process group: the session had it too.
    if (si.ssi_code == SI_KERNEL) return;
    if (Status s = io::send_packet(events_.get(), broker::encode(broker::SignalEvent{signo})); !s)
        LOG_DEBUG << "broker: signal " << signo << " not forwarded: " << s.error().message;
}

SessionEnd Broker::run() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : kForwarded) sigaddset(&set, s);
    sigaddset(&set, SIGCHLD);
    io::UniqueFd sigfd(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sigfd.valid()) LOG_ERROR << os_error("broker: signalfd");
    bool requests_open = true;
    while (!end_) {
        pollfd fds[2] = {{requests_open ? requests_.get() : -1, POLLIN, 0}, {sigfd.get(), POLLIN, 0}};
        const int captive_ms = poll_timeout_ms();
        int timeout = requests_open ? captive_ms : 1000;
        if (!requests_open && captive_ms >= 0) timeout = std::min(timeout, captive_ms);
        if (::poll(fds, 2, timeout) < 0 && errno != EINTR) break;
        if (captive_until_ && std::chrono::steady_clock::now() >= *captive_until_) close_captive("its time is up");
        if (fds[1].revents & POLLIN) {
            signalfd_siginfo si;
            while (::read(sigfd.get(), &si, sizeof si) == sizeof si) on_signal(si);
        }
        if (requests_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            auto p = io::receive_packet(requests_.get(), broker::kMaxMessage);
            if (!p || p->eof) {
                if (!p) LOG_WARN << "broker: " << p.error().message;
                requests_open = false;  // the session has gone or is going: wait for it
            } else {
                serve(*p);
                // The request's bytes (a state file's: a cookie, an HOTP secret) go now.
                secure_zero(p->bytes.data(), p->bytes.size());
            }
        }
        if (!requests_open && !end_) reap(WNOHANG);
    }
    close_captive("the session has ended");  // the tear-down below removes the kill switch too
    if (!end_) {
        reap(0);
        if (!end_) end_ = SessionEnd{true, 1, 0};
    }
    if (end_->signal) {
        const char* name = sigabbrev_np(end_->signal);
        const std::string sig = "SIG" + (name ? std::string(name) : std::to_string(end_->signal));
        if (end_->signal == SIGINT || end_->signal == SIGTERM || end_->signal == SIGHUP) {
            // Asked to end (a terminal's Ctrl-C reaches the session too, e.g. at a password
            // prompt): one line, no error; the exit status is 1 as for a login cut short.
            LOG_INFO << "interrupted (" << sig << ")" << (state_.up() ? ": the tunnel is down" : " before the tunnel was up");
            end_ = SessionEnd{true, 1, 0};
        } else {
            std::string why = end_->signal == SIGSYS ? " (a forbidden system call)" : "";
            LOG_ERROR << "the session process was killed by " << sig << why << "; the tunnel is down";
        }
    }
    host_.tear_down();
    return *end_;
}

}  // namespace

void block_broker_signals(sigset_t* old) {
    sigset_t set;
    sigemptyset(&set);
    for (int s : kForwarded) sigaddset(&set, s);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, old);
}

SessionEnd run_broker(io::UniqueFd requests, io::UniqueFd events, pid_t session, const BrokerOptions& options) {
    Broker b(std::move(requests), std::move(events), session, options);
    return b.run();
}

bool state_path_allowed(const BrokerOptions& o, const std::string& path) {
    for (const auto& f : o.state_files)
        if (!f.empty() && f == path) return true;
    if (o.state_dir.empty()) return false;
    std::string dir = o.state_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 || path[dir.size()] != '/') return false;
    return state_name_ok(std::string_view(path).substr(dir.size() + 1));
}

}  // namespace espvpn::host
