#include "src/host/tunnel_host.h"

#include <fstream>
#include <sstream>

#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "src/log/logger.h"
#include "src/host/routes.h"
#include "src/io/dns_socket.h"

namespace espvpn::host {

TunnelHost::TunnelHost(TunnelHostOptions options) : o_(std::move(options)) {
    if (!o_.script.empty()) scripts_ = std::make_unique<ScriptRunner>(o_.script);
}

TunnelHost::~TunnelHost() { tear_down(); }

Result<io::UniqueFd> TunnelHost::open_probe_socket(int family) {
    if (family != AF_INET && family != AF_INET6) return make_error("probe socket: not an IP family");
    refresh_probe_route(family);  // the network may have changed during the outage
    io::UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return make_error(std::string("probe socket: ") + std::strerror(errno));
    const std::uint32_t mark = kProbeMark;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0)
        return make_error(std::string("probe socket: SO_MARK: ") + std::strerror(errno));
    // Bound to the device of the host's own default route: its packets can never take the
    // tunnel, also when that route goes (a link down) while it connects. Without one known,
    // unbound: it follows the main table (a --trusted-server check refuses such a socket).
    const auto& hop = probe_hop_[family == AF_INET6 ? 1 : 0];
    char name[IF_NAMESIZE] = {};
    if (hop && ::if_indextoname(static_cast<unsigned>(hop->ifindex), name) &&
        ::setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, name, static_cast<socklen_t>(std::strlen(name))) != 0)
        return make_error(std::string("probe socket: SO_BINDTODEVICE ") + name + ": " + std::strerror(errno));
    return fd;
}

Result<io::UniqueFd> TunnelHost::open_dns_listener(const std::string& address, int port, const std::string& device) {
    return io::DnsSocket::listen_fd(address, static_cast<unsigned>(port), device);
}

host::ScriptEnv TunnelHost::script_env(ScriptReason reason) const {
    TunnelConfig c = config_;
    c.mtu = mtu_;
    ScriptContext ctx{reason, tun_ ? tun_->name() : o_.interface_name, static_cast<int>(getpid()),
                             o_.log_level};
    return build_script_env(c, ctx);
}

void TunnelHost::run_script(ScriptReason reason) {
    if (!scripts_) return;
    // Awaited by the control thread only; the packet threads keep forwarding meanwhile.
    scripts_->run(script_env(reason)).wait();
}

void TunnelHost::queue_script(ScriptReason reason) {
    if (scripts_) scripts_->run(script_env(reason));
}

Status TunnelHost::bring_up(const TunnelConfig& config, int mtu) {
    config_ = config;
    mtu_ = mtu;
    run_script(ScriptReason::pre_init);
    io::TunOptions t;
    t.name = o_.interface_name;
    auto tun = io::TunDevice::open(t);
    if (!tun) return make_error("tun device: " + tun.error().message);
    tun_.emplace(std::move(*tun));
    if (o_.queue_len > 0) {
        if (Status s = tun_->set_tx_queue_len(static_cast<unsigned>(o_.queue_len)); !s)
            return make_error("tun device: -Q " + std::to_string(o_.queue_len) + ": " + s.error().message);
    }
    LOG_INFO << "tun device " << tun_->name() << " (offloads: " << (tun_->offloads().tso ? "TSO" : "none")
             << (tun_->offloads().uso ? "+USO" : "") << ")";
    if (scripts_) {
        run_script(ScriptReason::connect);
    } else if (Status s = configure_netlink(); !s) {
        return make_error("host setup: " + s.error().message);
    }
    return install_kill_switch();
}

Status TunnelHost::install_kill_switch() {
    if (!o_.kill_switch) {
        // A table a killed espvpn left would block this tunnel's gateway: report and remove it.
        if (std::string left = remove_left_behind_kill_switch(); !left.empty()) LOG_WARN << left;
        return {};
    }
    KillSwitchRules rules;
    rules.tun_name = tun_->name();
    rules.pid = static_cast<int>(::getpid());
    for (const std::string& a : {config_.gateway_address, config_.direct_udp_address})
        if (!a.empty()) rules.peers.push_back(a);
    for (const KillSwitchService& s : o_.login_servers)  // a portal that is the gateway needs no rule of its own
        if (std::find(rules.peers.begin(), rules.peers.end(), s.address) == rules.peers.end())
            rules.tcp_services.push_back(s);
    for (const std::string& text : o_.allow_lan) {
        if (text == "attached") {
            for (const IpPrefix& p : attached_networks(rules.tun_name)) rules.allowed.push_back(p);
            continue;
        }
        auto p = IpPrefix::parse(text);
        if (!p) return make_error("--allow-lan " + text + ": " + p.error().message);
        rules.allowed.push_back(*p);
    }
    for (const IpPrefix& p : config_.split_exclude) rules.allowed.push_back(p);
    if (kill_switch_) return kill_switch_->replace(rules);  // held through a captive portal
    auto ks = KillSwitch::install(rules);
    if (!ks) return ks.error();
    kill_switch_ = std::move(*ks);
    return {};
}

// Without --script: addresses, MTU and split routes through netlink.
Status TunnelHost::configure_netlink() {
    const TunnelConfig& c = config_;
    if (Status s = tun_->set_mtu(static_cast<unsigned>(mtu_)); !s) return s;
    auto add = [&](const std::string& text) -> Status {
        auto a = io::InterfaceAddress::parse(text);
        if (!a) return make_error("address " + text + ": " + a.error().message);
        return tun_->add_address(*a);
    };
    if (!c.ip4_address.empty()) {
        if (Status s = add(c.ip4_address + "/32"); !s) return s;
    }
    if (!c.ip6_address.empty() && !o_.disable_ipv6) {
        if (Status s = add(c.ip6_address + "/" + std::to_string(c.ip6_prefix)); !s) return s;
    }
    if (Status s = tun_->set_up(true); !s) return s;
    if (Status s = add_routes(); !s) return s;
    if (!c.dns.empty()) {
        if (Status s = point_dns_at(""); !s) LOG_WARN << "DNS not configured: " << s.error().message;
    }
    return {};
}

Status TunnelHost::point_dns_at(const std::string& forwarder) {
    if (!domain_routes_possible() || config_.dns.empty()) return make_error("no built-in DNS setup");
    dns_.reset();  // the file or the link as they were, before they are written again
    auto dns = HostDns::apply(built_in_dns_settings(config_, tun_->name(), tun_->ifindex(), getpid(), forwarder));
    if (!dns) return dns.error();
    dns_ = std::move(*dns);
    return {};
}

namespace {
Result<io::InterfaceAddress> to_interface_address(const IpPrefix& p) {
    auto a = io::InterfaceAddress::parse(p.to_string());
    if (!a) return make_error("route " + p.to_string() + ": " + a.error().message);
    return a;
}

RoutePath to_route_path(const io::RouteNextHop& hop) {
    char name[IF_NAMESIZE] = {};
    const bool named = if_indextoname(static_cast<unsigned>(hop.ifindex), name) != nullptr;
    return RoutePath{hop.gateway_text(), hop.ifindex, named ? name : ""};
}

Result<io::RouteNextHop> to_next_hop(const RoutePath& path, bool v6) {
    io::RouteNextHop hop;
    hop.family = v6 ? AF_INET6 : AF_INET;
    hop.ifindex = path.ifindex;
    if (!path.via.empty()) {
        auto via = io::InterfaceAddress::parse(path.via);
        if (!via || via->family != hop.family) return make_error("next hop " + path.via + ": not a " +
                                                                 (v6 ? "IPv6" : "IPv4") + " address");
        std::memcpy(hop.gateway, via->address, sizeof hop.gateway);
        hop.has_gateway = true;
    }
    return hop;
}
}  // namespace

std::optional<RoutePath> TunnelHost::path_now(const IpPrefix& p) {
    auto a = to_interface_address(p);
    if (!a) return std::nullopt;
    std::string why;
    auto hop = netlink_->get_route(*a, &why);
    if (!hop || !*hop) {
        LOG_DEBUG << "route get " << p.address() << ": " << (hop ? why : hop.error().message);
        return std::nullopt;
    }
    if ((*hop)->ifindex == tun_->ifindex()) return std::nullopt;  // already ours: no way around it
    return to_route_path(**hop);
}

// The gateway's host route and the excluded prefixes keep the path they take
// now (added first, removed by tear_down); then the tunnel's routes via the tun.
Status TunnelHost::add_routes() {
    auto netlink = io::RtNetlink::open();
    if (!netlink) return make_error(netlink.error().message);
    netlink_.emplace(std::move(*netlink));
    auto path = [this](const IpPrefix& p) { return path_now(p); };
    const HostRoutePlan plan = plan_host_routes(config_, o_.disable_ipv6, path);
    // Before the tunnel's routes exist: the way to the gateway, for the domain excludes.
    for (const std::string* peer : {&config_.gateway_address, &config_.direct_udp_address})
        if (auto gw = IpPrefix::parse(*peer); !peer->empty() && gw && !gateway_path_[gw->v6])
            gateway_path_[gw->v6] = path_now(*gw);
    for (const std::string& note : plan.notes) LOG_INFO << note;
    for (const BypassRoute& b : plan.bypass) {
        auto dst = to_interface_address(b.destination);
        if (!dst) return dst.error();
        auto hop = to_next_hop(b.path, b.destination.v6);
        if (!hop) return hop.error();
        bool exists = false;
        if (Status s = netlink_->add_route_via(*dst, *hop, &exists); !s) {
            if (!exists) return make_error(s.error().message + " (" + b.reason + ")");
            LOG_INFO << "route " << b.destination.to_string() << " (" << b.reason << ") already present: left as it is";
            continue;
        }
        bypass_routes_.emplace_back(*dst, *hop);
        LOG_INFO << "route " << b.destination.to_string() << " " << b.path.to_string() << " (" << b.reason
                 << ", outside the tunnel)";
    }
    for (const IpPrefix& r : plan.tunnel) {
        auto dst = to_interface_address(r);
        if (!dst) return dst.error();
        if (Status s = tun_->add_route(*dst); !s) return make_error("route " + r.to_string() + ": " + s.error().message);
        LOG_INFO << "route " << r.to_string() << " dev " << tun_->name();
    }
    add_probe_routes();
    return {};
}

void TunnelHost::add_probe_routes() {
    for (int family : {AF_INET, AF_INET6}) refresh_probe_route(family);
}

void TunnelHost::refresh_probe_route(int family) {
    if (!netlink_ || !tun_) return;
    const int v6 = family == AF_INET6 ? 1 : 0;
    // The host's own default route (the tunnel's are /1 halves beside it): the one a new
    // network (a resume in a hotel) brings too.
    auto routes = netlink_->default_routes(family, tun_->ifindex());
    if (!routes) {
        LOG_DEBUG << "captive-portal probe: " << routes.error().message;
        return;
    }
    if (routes->empty()) return;  // none outside the tunnel: the probe follows the main table
    const io::RouteNextHop& hop = routes->front();
    auto dst = io::InterfaceAddress::parse(v6 ? "::/0" : "0.0.0.0/0");
    if (!dst) return;
    // Replaced each time: a link that went down took the table's route with it, even when
    // the network that comes back gives the same one.
    const bool same = probe_hop_[v6] && probe_hop_[v6]->ifindex == hop.ifindex &&
                      probe_hop_[v6]->has_gateway == hop.has_gateway &&
                      std::memcmp(probe_hop_[v6]->gateway, hop.gateway, sizeof hop.gateway) == 0;
    if (Status s = netlink_->replace_route_in(kProbeTable, *dst, hop); !s) {
        LOG_WARN << "captive-portal probe: " << s.error().message << "; during an outage it follows the tunnel's routes";
        return;
    }
    probe_hop_[v6] = hop;
    if (!same) LOG_DEBUG << "captive-portal probe: its packets take the default route via "
              << (hop.has_gateway ? hop.gateway_text() : std::string("the link")) << " (ifindex " << hop.ifindex
              << "; fwmark " << kProbeMark << ", table " << kProbeTable << ")";
    if (probe_rule_[v6]) return;
    if (Status s = netlink_->add_fwmark_rule(family, kProbeMark, kProbeTable, kProbeRulePriority); !s)
        LOG_DEBUG << "captive-portal probe: " << s.error().message << " (left by an earlier run?)";
    probe_rule_[v6] = true;
}

void TunnelHost::remove_probe_routes() {
    for (int v6 = 0; v6 < 2; ++v6) {
        const int family = v6 ? AF_INET6 : AF_INET;
        if (probe_rule_[v6]) {
            if (Status s = netlink_->delete_fwmark_rule(family, kProbeMark, kProbeTable, kProbeRulePriority); !s)
                LOG_WARN << s.error().message;
        }
        if (probe_hop_[v6]) {
            auto dst = io::InterfaceAddress::parse(v6 ? "::/0" : "0.0.0.0/0");
            if (dst) {
                if (Status s = netlink_->delete_route_in(kProbeTable, *dst, *probe_hop_[v6]); !s)
                    LOG_DEBUG << s.error().message;
            }
        }
        probe_rule_[v6] = false;
        probe_hop_[v6].reset();
    }
}

void TunnelHost::remove_bypass_routes() {
    for (const auto& [dst, hop] : bypass_routes_)
        if (Status s = netlink_->delete_route_via(dst, hop); !s) LOG_WARN << s.error().message;
    bypass_routes_.clear();
}

Result<std::string> TunnelHost::add_domain_route(const IpPrefix& address, bool include) {
    if (!domain_routes_possible()) return make_error("no built-in route setup");
    auto dst = to_interface_address(address);
    if (!dst) return dst.error();
    bool into_tun = false;
    if (!include) {
        auto hop = netlink_->get_route(*dst);
        into_tun = hop && *hop && (*hop)->ifindex == tun_->ifindex();
    }
    const DomainRoutePlan plan =
        plan_domain_route(config_, o_.disable_ipv6, address, include, into_tun, gateway_path_[address.v6 ? 1 : 0]);
    if (plan.kind == DomainRoutePlan::Kind::none) return plan.note;
    const RoutePath path = plan.kind == DomainRoutePlan::Kind::tun ? RoutePath{"", tun_->ifindex(), tun_->name()} : plan.path;
    auto hop = to_next_hop(path, address.v6);
    if (!hop) return hop.error();
    // Never replaces a route that is there (the user's, or one of ours): it stays as it is.
    bool exists = false;
    if (Status s = netlink_->add_route_via(*dst, *hop, &exists); !s) {
        if (exists) return std::string("a route to it exists already: left as it is");
        return s.error();
    }
    domain_routes_.push_back({address, include, *dst, *hop});
    return path.to_string() + (plan.kind == DomainRoutePlan::Kind::tun ? "" : " (outside the tunnel)");
}

void TunnelHost::remove_domain_route(const IpPrefix& address, bool include) {
    auto it = std::find_if(domain_routes_.begin(), domain_routes_.end(),
                           [&](const DomainHostRoute& r) { return r.address == address && r.include == include; });
    if (it == domain_routes_.end()) return;  // none was added for it
    Status s = netlink_->delete_route_via(it->dst, it->hop);
    if (!s) LOG_WARN << "route " << address.to_string() << ": " << s.error().message;
    domain_routes_.erase(it);
}

void TunnelHost::remove_domain_routes() {
    while (!domain_routes_.empty()) {
        const DomainHostRoute r = domain_routes_.back();
        remove_domain_route(r.address, r.include);
    }
}

void TunnelHost::tear_down_holding_kill_switch() {
    std::unique_ptr<KillSwitch> held = std::move(kill_switch_);
    tear_down();
    kill_switch_ = std::move(held);
    if (kill_switch_) LOG_INFO << "kill switch kept while a captive portal stands before the gateway";
}

namespace {
// The numeric, non-loopback nameserver addresses of a resolv.conf-format file.
void nameservers_of(const char* path, std::vector<std::string>& out) {
    std::ifstream in(path);
    std::string line;
    for (int lines = 0; lines < 1000 && std::getline(in, line); ++lines) {
        std::istringstream words(line);
        std::string key, value;
        if (!(words >> key >> value) || key != "nameserver") continue;
        bool v6 = false;
        auto n = normalise_ip(value, &v6);
        if (!n || n->rfind("127.", 0) == 0 || *n == "::1") continue;
        if (std::find(out.begin(), out.end(), *n) == out.end()) out.push_back(*n);
    }
}
}  // namespace

Result<std::string> TunnelHost::open_captive_exception(int seconds) {
    if (!holds_kill_switch()) return make_error("no kill switch is held for a captive portal");
    std::vector<std::string> dns;
    nameservers_of("/etc/resolv.conf", dns);
    nameservers_of("/run/systemd/resolve/resolv.conf", dns);  // systemd-resolved's upstream servers
    if (Status s = kill_switch_->open_captive_exception(dns, seconds); !s) return s.error();
    std::string list;
    for (const std::string& a : dns) list += (list.empty() ? "" : ", ") + a;
    return "TCP 80/443 to any address, DNS to " + (list.empty() ? std::string("no server (none found)") : list) +
           " for " + std::to_string(seconds) + " s";
}

void TunnelHost::close_captive_exception() {
    if (!kill_switch_) return;
    if (Status s = kill_switch_->close_captive_exception(); !s) LOG_ERROR << s.error().message;
}

void TunnelHost::tear_down() {
    if (tun_) run_script(ScriptReason::disconnect);
    scripts_.reset();
    dns_.reset();
    if (tun_ && netlink_) remove_domain_routes();
    remove_bypass_routes();
    if (netlink_) remove_probe_routes();
    tun_.reset();  // removes the device (or our addresses/routes on a persistent one)
    gateway_path_[0].reset();  // the next session (--always-on) finds the way to its gateway anew
    gateway_path_[1].reset();
    kill_switch_.reset();  // a clean exit: traffic may leave outside the tunnel again
}

}  // namespace espvpn::host
