#include "src/host/dns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "src/log/logger.h"

namespace espvpn::host {

namespace {

std::vector<std::string> words(std::string_view line) {
    std::vector<std::string> out;
    std::istringstream in{std::string(line)};
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// ---- resolv.conf --------------------------------------------------------------

Result<std::string> read_all(int fd) {
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
        ssize_t got = pread(fd, buf, sizeof buf, at);
        if (got < 0) {
            if (errno == EINTR) continue;
            return make_error(std::string("read: ") + strerror(errno));
        }
        if (got == 0) return out;
        out.append(buf, static_cast<std::size_t>(got));
        at += got;
    }
}

// In place (pwrite + ftruncate), not by rename: the file may be a bind mount, and
// the descriptor opened before --setuid stays writable after it.
Status write_all(int fd, std::string_view text) {
    for (std::size_t done = 0; done < text.size();) {
        ssize_t n = pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return make_error(std::string("write: ") + strerror(errno));
        }
        done += static_cast<std::size_t>(n);
    }
    if (ftruncate(fd, static_cast<off_t>(text.size())) != 0)
        return make_error(std::string("truncate: ") + strerror(errno));
    return {};
}

// The header compose_resolv_conf writes: "# written by espvpn (pid N) ...". N, or 0.
int writer_pid(std::string_view text) {
    constexpr std::string_view kHeader = "# written by espvpn (pid ";
    if (text.substr(0, kHeader.size()) != kHeader) return 0;
    int pid = 0;
    for (std::size_t i = kHeader.size(); i < text.size() && text[i] >= '0' && text[i] <= '9' && pid < 1 << 22; ++i)
        pid = pid * 10 + (text[i] - '0');
    return pid;
}

std::string backup_path(const std::string& dir, int pid) { return dir + "/resolv.conf." + std::to_string(pid); }

// A file left by an espvpn that died without restoring it (SIGKILL, a crash): its
// saved original, when that process is gone and the backup is there.
std::optional<std::string> original_left_behind(std::string_view current, const std::string& backup_dir, int own_pid) {
    const int pid = writer_pid(current);
    if (pid <= 0 || pid == own_pid || kill(pid, 0) == 0 || errno != ESRCH) return std::nullopt;
    const std::string path = backup_path(backup_dir, pid);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);  // a backup is a file we made
    if (fd < 0) return std::nullopt;
    auto saved = read_all(fd);
    close(fd);
    unlink(path.c_str());
    if (!saved || saved->empty()) return std::nullopt;
    return std::move(*saved);
}

// resolv.conf has one list of servers for every name: a split tunnel's "only these
// domains to the VPN" cannot be said there.
std::string cannot_route_note(const DnsSettings& s) {
    std::string names;
    for (const auto* list : {&s.search_domains, &s.routing_domains})
        for (const auto& d : *list) names += (names.empty() ? "" : " ") + d;
    return "split tunnel, but resolv.conf cannot send only " + names +
           " to the VPN's servers: all names go to them first (systemd-resolved can split)";
}

class ResolvConfDns final : public HostDns {
public:
    static Result<std::unique_ptr<HostDns>> apply(const DnsSettings& s, const HostDnsOptions& o) {
        const std::string& path = o.resolv_conf;
        int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) return make_error("open " + path + ": " + strerror(errno));
        std::unique_ptr<ResolvConfDns> dns(new ResolvConfDns(fd, path));
        auto original = read_all(fd);
        if (!original) return make_error(path + ": " + original.error().message);
        dns->original_ = std::move(*original);
        if (auto left = original_left_behind(dns->original_, o.backup_dir, s.vpn_pid)) {
            LOG_WARN << "DNS: " << path << " was left by espvpn (pid " << writer_pid(dns->original_)
                     << "), which ended without restoring it; its saved original is what gets restored now";
            dns->original_ = std::move(*left);
        } else if (writer_pid(dns->original_) > 0) {
            LOG_WARN << "DNS: " << path << " was written by another espvpn (pid " << writer_pid(dns->original_)
                     << ") and no saved original of it is left; its contents count as the original";
        }
        dns->save_backup(o.backup_dir, s.vpn_pid);
        dns->written_ = compose_resolv_conf(dns->original_, s);
        if (Status st = write_all(fd, dns->written_); !st) return make_error(path + ": " + st.error().message);
        std::string names;  // the VPN's servers, or espvpn's own forwarder (wildcard split domains)
        for (const std::string& a : s.servers) names += (names.empty() ? "" : " ") + a;
        LOG_INFO << "DNS: " << path << " now names " << names << " (restored on exit)";
        if (!s.default_route) LOG_WARN << "DNS: " << cannot_route_note(s);
        return std::unique_ptr<HostDns>(std::move(dns));
    }
    ~ResolvConfDns() override {
        auto now = read_all(fd_);
        bool keep_backup = false;
        if (!now) {
            LOG_WARN << "DNS: cannot restore " << path_ << ": " << now.error().message;
        } else if (*now != written_) {
            LOG_WARN << "DNS: " << path_ << " was changed by someone else meanwhile; left as it is";
            // Another espvpn stacked on ours: it will put back our file when it ends,
            // and whoever finds that file then needs our original.
            keep_backup = writer_pid(*now) > 0;
        } else {
            // Our original may be the file of an espvpn that ended while we ran (two
            // VPNs at once, the other one gone first): put back what it replaced.
            if (auto left = original_left_behind(original_, backup_dir_, own_pid_)) original_ = std::move(*left);
            if (Status st = write_all(fd_, original_); !st)
                LOG_WARN << "DNS: cannot restore " << path_ << ": " << st.error().message;
            else
                LOG_INFO << "DNS: " << path_ << " restored";
        }
        close(fd_);
        if (keep_backup) {
            close(backup_fd_);
            backup_fd_ = -1;
        }
        drop_backup();
    }
    std::string_view method() const override { return "resolv.conf"; }

private:
    ResolvConfDns(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

    // The original on disk while the file is ours, so that an espvpn killed with
    // SIGKILL is undone by the next one. Best effort: without it only a crash is
    // worse off. The descriptor stays open to empty the backup after --setuid,
    // when it can no longer be unlinked.
    void save_backup(const std::string& dir, int pid) {
        backup_dir_ = dir;
        own_pid_ = pid;
        if (dir.empty()) return;
        if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return;
        backup_ = backup_path(dir, pid);
        // Created new: one left by an earlier process with this pid goes first (unlink never follows).
        unlink(backup_.c_str());
        backup_fd_ = open(backup_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (backup_fd_ < 0 || !write_all(backup_fd_, original_)) {
            LOG_DEBUG << "DNS: no backup of " << path_ << " in " << dir << ": " << strerror(errno);
            drop_backup();
        }
    }
    void drop_backup() {
        if (backup_fd_ < 0) return;
        if (unlink(backup_.c_str()) != 0 && ftruncate(backup_fd_, 0) != 0)
            LOG_DEBUG << "DNS: cannot remove " << backup_ << ": " << strerror(errno);
        close(backup_fd_);
        backup_fd_ = -1;
    }

    int fd_;
    std::string path_;
    std::string original_, written_;
    std::string backup_dir_, backup_;
    int backup_fd_ = -1;
    int own_pid_ = 0;
};

// ---- systemd-resolved -----------------------------------------------------------

constexpr const char* kResolved = "org.freedesktop.resolve1";
constexpr const char* kResolvedPath = "/org/freedesktop/resolve1";
constexpr const char* kResolvedManager = "org.freedesktop.resolve1.Manager";
constexpr std::uint64_t kBusTimeoutUs = 5'000'000;

// "what: why" of a failed call; frees `e`.
Error bus_error(const char* what, int r, sd_bus_error& e) {
    Error out = make_error(std::string(what) + ": " + (e.message ? e.message : strerror(-r)));
    sd_bus_error_free(&e);
    return out;
}

class ResolvedDns final : public HostDns {
public:
    // An error means "not usable here" (no bus, resolved not running, refused).
    static Result<std::unique_ptr<HostDns>> apply(const DnsSettings& s) {
        sd_bus* bus = nullptr;
        if (int r = sd_bus_open_system(&bus); r < 0) return make_error(std::string("system bus: ") + strerror(-r));
        std::unique_ptr<ResolvedDns> dns(new ResolvedDns(bus, s.ifindex));
        sd_bus_error err = SD_BUS_ERROR_NULL;
        sd_bus_message* reply = nullptr;
        int r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "NameHasOwner", &err, &reply, "s", kResolved);
        int owned = 0;
        if (r >= 0) r = sd_bus_message_read(reply, "b", &owned);
        sd_bus_message_unref(reply);
        if (r < 0) return bus_error("NameHasOwner", r, err);
        if (!owned) return make_error("systemd-resolved is not running");
        if (Status st = dns->set_servers(s.servers); !st) return st.error();
        dns->applied_ = true;  // from here on, RevertLink on destruction
        if (Status st = dns->set_domains(s); !st) return st.error();
        // Older resolved lacks SetLinkDefaultRoute; the domains alone still work there.
        if (Status st = dns->call_bool("SetLinkDefaultRoute", s.default_route); !st)
            LOG_DEBUG << "DNS: " << st.error().message;
        LOG_INFO << "DNS: systemd-resolved serves " << s.servers.size() << " VPN server(s) on "
                 << s.interface_name << " (reverted on exit)";
        return std::unique_ptr<HostDns>(std::move(dns));
    }
    ~ResolvedDns() override {
        if (applied_) {
            sd_bus_error err = SD_BUS_ERROR_NULL;
            int r = sd_bus_call_method(bus_, kResolved, kResolvedPath, kResolvedManager, "RevertLink", &err,
                                       nullptr, "i", ifindex_);
            if (r < 0) LOG_WARN << "DNS: " << bus_error("RevertLink", r, err).message;
            else LOG_INFO << "DNS: systemd-resolved link settings reverted";
            sd_bus_error_free(&err);  // also when the warning above is not logged
        }
        sd_bus_flush_close_unref(bus_);
    }
    std::string_view method() const override { return "systemd-resolved"; }

private:
    ResolvedDns(sd_bus* bus, int ifindex) : bus_(bus), ifindex_(ifindex) {}

    // Sends a method call whose arguments were appended with result `built`
    // (negative: appending failed, nothing is sent); frees the message either way.
    Status send(sd_bus_message* m, int built, const char* what) {
        if (built < 0) {
            sd_bus_message_unref(m);
            return make_error(std::string(what) + ": " + strerror(-built));
        }
        sd_bus_error err = SD_BUS_ERROR_NULL;
        int r = sd_bus_call(bus_, m, kBusTimeoutUs, &err, nullptr);
        sd_bus_message_unref(m);
        if (r < 0) return bus_error(what, r, err);
        return {};
    }

    Result<sd_bus_message*> begin(const char* method) {
        sd_bus_message* m = nullptr;
        int r = sd_bus_message_new_method_call(bus_, &m, kResolved, kResolvedPath, kResolvedManager, method);
        if (r >= 0) r = sd_bus_message_append(m, "i", ifindex_);
        if (r < 0) {
            sd_bus_message_unref(m);
            return make_error(std::string(method) + ": " + strerror(-r));
        }
        return m;
    }

    Status set_servers(const std::vector<std::string>& servers) {
        auto m = begin("SetLinkDNS");
        if (!m) return m.error();
        int r = sd_bus_message_open_container(*m, 'a', "(iay)");
        for (const auto& text : servers) {
            unsigned char bytes[16];
            int family = text.find(':') == std::string::npos ? AF_INET : AF_INET6;
            if (inet_pton(family, text.c_str(), bytes) != 1) continue;  // validated upstream
            if (r >= 0) r = sd_bus_message_open_container(*m, 'r', "iay");
            if (r >= 0) r = sd_bus_message_append(*m, "i", family);
            if (r >= 0) r = sd_bus_message_append_array(*m, 'y', bytes, family == AF_INET ? 4 : 16);
            if (r >= 0) r = sd_bus_message_close_container(*m);
        }
        if (r >= 0) r = sd_bus_message_close_container(*m);
        return send(*m, r, "SetLinkDNS");
    }

    Status set_domains(const DnsSettings& s) {
        auto m = begin("SetLinkDomains");
        if (!m) return m.error();
        int r = sd_bus_message_open_container(*m, 'a', "(sb)");
        for (const auto& d : s.search_domains)
            if (r >= 0) r = sd_bus_message_append(*m, "(sb)", d.c_str(), 0);
        for (const auto& d : s.routing_domains)
            if (r >= 0) r = sd_bus_message_append(*m, "(sb)", d.c_str(), 1);
        if (s.default_route && r >= 0) r = sd_bus_message_append(*m, "(sb)", ".", 1);
        if (r >= 0) r = sd_bus_message_close_container(*m);
        return send(*m, r, "SetLinkDomains");
    }

    Status call_bool(const char* method, bool value) {
        auto m = begin(method);
        if (!m) return m.error();
        return send(*m, sd_bus_message_append(*m, "b", value ? 1 : 0), method);
    }

    sd_bus* bus_;
    int ifindex_;
    bool applied_ = false;
};

}  // namespace

std::string compose_resolv_conf(std::string_view original, const DnsSettings& s) {
    std::vector<std::string> search = s.search_domains, kept;
    std::istringstream in{std::string(original)};
    for (std::string line; std::getline(in, line);) {
        auto w = words(line);
        if (!w.empty() && (w[0] == "search" || w[0] == "domain")) {
            for (std::size_t i = 1; i < w.size(); ++i) search.push_back(w[i]);
        } else if (!w.empty() && w[0] == "nameserver") {
            continue;
        } else if (!w.empty() && w[0][0] != '#' && w[0][0] != ';') {
            kept.push_back(line);
        }
    }
    std::ostringstream out;
    out << "# written by espvpn (pid " << s.vpn_pid << ") for " << s.interface_name
        << "; the previous file is restored when it exits\n";
    int n = 0;
    for (const auto& server : s.servers)
        if (n++ < 3) out << "nameserver " << server << "\n";
    if (!search.empty()) {
        out << "search";
        for (std::size_t i = 0; i < search.size(); ++i) {
            bool seen = false;
            for (std::size_t j = 0; j < i; ++j) seen = seen || search[j] == search[i];
            if (!seen) out << " " << search[i];
        }
        out << "\n";
    }
    for (const auto& line : kept) out << line << "\n";
    return out.str();
}

DnsSettings built_in_dns_settings(const TunnelConfig& c, const std::string& interface_name, int ifindex,
                                  int vpn_pid, const std::string& forwarder) {
    DnsSettings s;
    s.interface_name = interface_name;
    s.ifindex = ifindex;
    s.servers = c.dns;
    s.search_domains = words(c.default_domain);
    // The names the gateway says are its own: AnyConnect's X-CSTP-Split-DNS, GP's
    // include-split-tunneling-domain entries that name a whole domain (a "*." or ":port"
    // entry is about traffic, not about which server knows the name). A search domain
    // routes its names to the link already; listed again as routing-only, systemd-resolved
    // would keep the last entry and stop searching it (ocserv's default-domain and
    // split-dns often name the same domain).
    std::vector<std::string> named = c.split_dns;
    for (const auto& d : c.split_include_domains)
        if (!d.wildcard && d.port == 0 && !d.name.empty()) named.push_back(d.name);
    bool every_name = false;  // a bare "*" wildcard through the forwarder
    if (!forwarder.empty()) {
        s.servers = {forwarder};
        for (const auto* list : {&c.split_include_domains, &c.split_exclude_domains})
            for (const auto& d : *list) {
                if (d.wildcard && d.name.empty()) every_name = true;
                else if (d.wildcard) named.push_back(d.name);
            }
    }
    for (const auto& d : named) {
        bool listed = false;
        for (const auto& e : s.search_domains) listed = listed || e == d;
        for (const auto& e : s.routing_domains) listed = listed || e == d;
        if (!listed) s.routing_domains.push_back(d);
    }
    // Full tunnel (no split-include route, or a default route among them): every name to the
    // VPN's servers, whatever domains it also names. Split tunnel: only its domains; all
    // names only when it names none.
    const auto& inc = c.split_include;
    s.full_tunnel = inc.empty() || std::any_of(inc.begin(), inc.end(), [](const IpPrefix& p) { return p.length == 0; });
    s.default_route = s.full_tunnel || every_name || (s.search_domains.empty() && s.routing_domains.empty());
    s.vpn_pid = vpn_pid;
    return s;
}

Result<std::unique_ptr<HostDns>> HostDns::apply(const DnsSettings& settings, const HostDnsOptions& options) {
    if (options.try_resolved) {
        auto resolved = ResolvedDns::apply(settings);
        if (resolved) return resolved;
        LOG_DEBUG << "DNS: not using systemd-resolved: " << resolved.error().message;
    }
    return ResolvConfDns::apply(settings, options);
}

}  // namespace espvpn::host
