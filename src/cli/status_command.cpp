#include "src/cli/status_command.h"

#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <ostream>
#include <vector>

#include "protocols/base/ascii.h"
#include "protocols/status/status_protocol.h"
#include "src/io/status_socket.h"
#include "src/log/logger.h"

namespace espvpn::cli {

using status::State;

std::string status_socket_for(const std::string& name) { return std::string(kStatusDir) + "/" + name + ".sock"; }

StatusService::~StatusService() {
    server.reset();
    if (!path.empty()) ::unlink(path.c_str());  // our directory; may fail after --setuid (the next start removes it)
}

Result<std::unique_ptr<StatusService>> open_status_service(const ClientOptions& o) {
    if (o.status_socket.empty()) return std::unique_ptr<StatusService>();
    session::StatusAccess access;
    for (const std::string& u : o.status_users) {
        const passwd* pw = ::getpwnam(u.c_str());
        if (!pw) return make_error("--status-user: no user '" + u + "'");
        access.users.push_back(pw->pw_uid);
    }
    for (const std::string& g : o.status_groups) {
        const group* gr = ::getgrnam(g.c_str());
        if (!gr) return make_error("--status-group: no group '" + g + "'");
        access.groups.push_back(gr->gr_gid);
    }
    io::StatusSocketMode mode;
    // Others may connect only when the profile names them; SO_PEERCRED decides per client.
    mode.mode = access.users.empty() && access.groups.empty() ? 0600 : 0666;
    auto fd = io::open_status_listener(o.status_socket, mode);
    if (!fd) return fd.error();
    status::Snapshot initial;
    initial.state = State::connecting;
    initial.protocol = o.protocol == Protocol::gp ? "gp" : "anyconnect";
    initial.always_on = o.always_on;
    auto s = std::make_unique<StatusService>(std::move(initial));
    s->listener = std::move(*fd);
    s->access = std::move(access);
    s->path = o.status_socket;
    return s;
}

Status StatusService::start() {
    if (!listener.valid()) return make_error("status socket " + path + ": not bound");
    auto started = session::StatusServer::start(std::move(listener), access, board);
    if (!started) return started.error();
    server = std::move(*started);
    LOG_INFO << "status socket: " << path;
    return {};
}

// --- The client subcommands -------------------------------------------------

namespace {

struct ClientArgs {
    status::Request request = status::Request::status;
    bool json = false;
    std::string path;
};

const char* const kUsage =
    "Usage: espvpn status [--json] [NAME | --status-socket PATH]\n"
    "       espvpn disconnect [NAME | --status-socket PATH]\n"
    "       espvpn reconnect [NAME | --status-socket PATH]\n"
    "NAME is the service's profile (/run/espvpn/NAME.sock); without one, the only socket in /run/espvpn.\n"
    "Exit codes: 0 connected (status) or done, 1 error, 3 not connected (status).\n";

// The sockets in /run/espvpn.
std::vector<std::string> running_profiles() {
    std::vector<std::string> names;
    DIR* d = ::opendir(kStatusDir);
    if (!d) return names;
    while (const dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 5 && n.ends_with(".sock")) names.push_back(n.substr(0, n.size() - 5));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

Result<ClientArgs> parse_client_args(int argc, char** argv) {
    ClientArgs a;
    const std::string verb = argv[1];
    a.request = verb == "disconnect" ? status::Request::disconnect
              : verb == "reconnect"  ? status::Request::reconnect
                                     : status::Request::status;
    std::string name;
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--json" && a.request == status::Request::status) {
            a.json = true;
        } else if (arg == "--status-socket" && i + 1 < argc) {
            a.path = argv[++i];
        } else if (arg.rfind("--status-socket=", 0) == 0) {
            a.path = arg.substr(16);
        } else if (arg == "-h" || arg == "--help") {
            return make_error("");
        } else if (!arg.empty() && arg[0] != '-' && name.empty()) {
            name = arg;
        } else {
            return make_error("unexpected argument '" + arg + "'");
        }
    }
    if (!name.empty() && !a.path.empty()) return make_error("give a profile NAME or --status-socket, not both");
    if (!name.empty()) {
        if (name.find('/') != std::string::npos || name == "." || name == "..")
            return make_error("a profile name has no '/': '" + name + "'");
        a.path = status_socket_for(name);
    }
    if (a.path.empty()) {
        const auto names = running_profiles();
        if (names.empty()) return make_error("no espvpn service is running (no socket in /run/espvpn)");
        if (names.size() > 1) {
            std::string list;
            for (const auto& n : names) list += " " + n;
            return make_error("more than one profile runs; name one:" + list);
        }
        a.path = status_socket_for(names[0]);
    }
    return a;
}

// One request, one reply line (5 s at most).
Result<status::Reply> ask(const std::string& path, status::Request r) {
    auto fd = io::connect_status_socket(path);
    if (!fd) return fd.error();
    const std::string line = status::request_line(r);
    if (::send(fd->get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
        return make_error("cannot send to " + path + ": " + std::strerror(errno));
    std::string in;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (in.find('\n') == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd->get(), POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
            return make_error("no reply from " + path + " within 5 s");
        const ssize_t n = ::recv(fd->get(), buf, sizeof buf, 0);
        if (n <= 0) return make_error("the status socket " + path + " closed without a reply");
        in.append(buf, static_cast<std::size_t>(n));
        if (in.size() > 64 * 1024) return make_error("the reply from " + path + " is too long");
    }
    return status::parse_reply(std::string_view(in).substr(0, in.find('\n')));
}

// Server text on one terminal line: controls escaped, newlines too.
std::string one_line(std::string_view s) {
    std::string out;
    for (char c : printable(s)) {
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else out += c;
    }
    return out;
}

std::string bytes_text(std::uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    char b[32];
    std::snprintf(b, sizeof b, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return b;
}

std::string time_text(std::int64_t t) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    ::localtime_r(&tt, &tm);
    char b[64];
    std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S %Z", &tm);
    return b;
}

std::string duration_text(std::int64_t s) {
    if (s < 0) s = 0;
    char b[32];
    if (s < 120) std::snprintf(b, sizeof b, "%lld s", static_cast<long long>(s));
    else if (s < 7200) std::snprintf(b, sizeof b, "%lld min", static_cast<long long>(s / 60));
    else std::snprintf(b, sizeof b, "%lld h %lld min", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
    return b;
}

void print_status(const status::Snapshot& s, std::ostream& out) {
    const std::int64_t now = std::time(nullptr);
    out << "state:      " << status::state_name(s.state) << " (since " << time_text(s.since) << ", "
        << duration_text(now - s.since) << ")" << (s.always_on ? "; always on" : "") << "\n";
    if (!s.gateway.empty()) out << "gateway:    " << one_line(s.gateway) << " (" << one_line(s.protocol) << ")\n";
    if (!s.transport.empty()) out << "transport:  " << one_line(s.transport) << "\n";
    if (!s.interface_name.empty())
        out << "interface:  " << one_line(s.interface_name) << ": in " << bytes_text(s.bytes_in) << ", out "
            << bytes_text(s.bytes_out) << "\n";
    if (s.expires > 0) out << "expires:    " << time_text(s.expires) << " (in " << duration_text(s.expires - now) << ")\n";
    if (!s.last_error.empty()) out << "last error: " << one_line(s.last_error) << "\n";
    if (s.state == State::needs_login)
        out << "A new login is needed: see the log (journalctl -u espvpn@NAME), then run 'espvpn reconnect'.\n";
    if (s.state == State::trusted_network)
        out << "On a trusted network: no tunnel until the host leaves it (the log says why it is trusted).\n";
    if (s.state == State::captive_portal)
        out << "portal:     " << one_line(s.portal)
            << "\nA captive portal stands before the gateway: log in to it in a browser; the tunnel comes up once it lets\n"
               "traffic through.\n";
}

}  // namespace

bool is_status_subcommand(int argc, char** argv) {
    if (argc < 2) return false;
    const std::string_view verb = argv[1];
    return verb == "status" || verb == "disconnect" || verb == "reconnect";
}

int run_status_subcommand(int argc, char** argv, std::ostream& out, std::ostream& err) {
    auto args = parse_client_args(argc, argv);
    if (!args) {
        if (!args.error().message.empty()) err << "espvpn: " << args.error().message << "\n";
        (args.error().message.empty() ? out : err) << kUsage;
        return args.error().message.empty() ? 0 : 1;
    }
    auto reply = ask(args->path, args->request);
    if (!reply) {
        err << "espvpn: " << reply.error().message << "\n";
        return 1;
    }
    if (!reply->ok) {
        err << "espvpn: " << args->path << ": " << one_line(reply->error) << "\n";
        return 1;
    }
    if (args->request != status::Request::status) {
        out << one_line(reply->message) << "\n";
        return 0;
    }
    if (!reply->status) {
        err << "espvpn: the reply from " << args->path << " holds no status\n";
        return 1;
    }
    if (args->json) out << status::status_reply(*reply->status);
    else print_status(*reply->status, out);
    return reply->status->state == State::connected ? 0 : 3;
}

}  // namespace espvpn::cli
