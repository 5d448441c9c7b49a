#include "src/host/kill_switch.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "src/log/logger.h"

namespace espvpn::host {

namespace {

const std::string kTable = std::string("inet ") + kKillSwitchTable;

// One libnftables context per command: the output and errors are buffered, not printed.
struct Nft {
    nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    Nft() {
        if (!ctx) return;
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
    }
    ~Nft() {
        if (ctx) nft_ctx_free(ctx);
    }
    Nft(const Nft&) = delete;
    Nft& operator=(const Nft&) = delete;

    // Runs an nft script as one transaction; the listing it printed, or nft's error.
    Result<std::string> run(const std::string& script) {
        if (!ctx) return make_error("nftables: cannot create a context");
        if (nft_run_cmd_from_buffer(ctx, script.c_str()) != 0) {
            std::string why = nft_ctx_get_error_buffer(ctx);
            while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
            return make_error("nftables: " + (why.empty() ? std::string("command refused") : why));
        }
        const char* out = nft_ctx_get_output_buffer(ctx);
        return std::string(out ? out : "");
    }
};

std::string quoted(const std::string& s) {
    std::string q = "\"";
    for (char c : s)
        if (c != '"' && c != '\\' && c != '\n') q += c;  // interface names never hold these
    return q + "\"";
}

// "ip daddr { a, b } accept" for one family, or nothing when the list is empty.
std::string address_rule(const char* family, const char* field, const std::vector<std::string>& items) {
    if (items.empty()) return {};
    std::string r = std::string("    ") + family + " " + field + " { ";
    for (std::size_t i = 0; i < items.size(); ++i) r += (i ? ", " : "") + items[i];
    return r + " } accept\n";
}

bool pid_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// "packets N bytes M" of the rule commented `name` in a listing with counters.
std::uint64_t counted_packets(const std::string& listing, const std::string& name) {
    std::smatch m;
    const std::regex re("counter packets ([0-9]+) bytes [0-9]+ drop comment \"" + name + "\"");
    if (std::regex_search(listing, m, re)) return std::stoull(m[1].str());
    return 0;
}

}  // namespace

std::string kill_switch_script(const KillSwitchRules& r) {
    std::vector<std::string> peers4, peers6, allowed4, allowed6;
    for (const std::string& p : r.peers) {
        bool v6 = false;
        auto n = normalise_ip(p, &v6);
        if (n) (v6 ? peers6 : peers4).push_back(*n);
    }
    for (const IpPrefix& p : r.allowed) (p.v6 ? allowed6 : allowed4).push_back(p.to_string());
    std::string tun = quoted(r.tun_name);

    // The first two lines make the replacement atomic: create if missing, delete, define.
    std::string s = "table " + kTable + "\ndelete table " + kTable + "\ntable " + kTable + " {\n";
    s += "  comment \"espvpn pid " + std::to_string(r.pid) + " --kill-switch\"\n";
    // A captive portal's exception (open_captive_exception): empty but while it is open.
    s += "  set captive_tcp {\n    type inet_service; flags timeout;\n  }\n";
    s += "  set captive_dns4 {\n    type ipv4_addr; flags timeout;\n  }\n";
    s += "  set captive_dns6 {\n    type ipv6_addr; flags timeout;\n  }\n";
    s += "  chain output {\n    type filter hook output priority filter; policy drop;\n";
    s += "    oifname \"lo\" accept\n    oifname " + tun + " accept\n";
    s += address_rule("ip", "daddr", peers4) + address_rule("ip6", "daddr", peers6);
    // The portal: new connections to its port only (their replies: ct state on input).
    for (const KillSwitchService& t : r.tcp_services) {
        bool v6 = false;
        auto n = normalise_ip(t.address, &v6);
        if (!n || t.port <= 0 || t.port > 65535) continue;
        s += std::string("    ") + (v6 ? "ip6" : "ip") + " daddr " + *n + " tcp dport " + std::to_string(t.port) + " accept\n";
    }
    s += address_rule("ip", "daddr", allowed4) + address_rule("ip6", "daddr", allowed6);
    s += "    udp sport 68 udp dport 67 accept\n";    // DHCPv4
    s += "    udp sport 546 udp dport 547 accept\n";  // DHCPv6
    s += "    icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert, mld-listener-report, "
         "mld2-listener-report } accept\n";
    s += "    meta mark " + std::to_string(kProbeMark) + " tcp dport 80 accept\n";  // the captive-portal probe
    s += "    tcp dport @captive_tcp accept\n";
    s += "    ip daddr @captive_dns4 meta l4proto { tcp, udp } th dport 53 accept\n";
    s += "    ip6 daddr @captive_dns6 meta l4proto { tcp, udp } th dport 53 accept\n";
    s += "    counter drop comment \"blocked out\"\n  }\n";
    s += "  chain input {\n    type filter hook input priority filter; policy drop;\n";
    s += "    iifname \"lo\" accept\n    iifname " + tun + " accept\n";
    // Replies to what output let through, and the ICMP errors about it (path MTU).
    s += "    ct state established,related accept\n";
    s += address_rule("ip", "saddr", peers4) + address_rule("ip6", "saddr", peers6);
    s += address_rule("ip", "saddr", allowed4) + address_rule("ip6", "saddr", allowed6);
    s += "    udp sport 67 udp dport 68 accept\n";
    s += "    udp sport 547 udp dport 546 accept\n";
    s += "    icmpv6 type { nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept\n";
    s += "    counter drop comment \"blocked in\"\n  }\n}\n";
    return s;
}

std::string captive_exception_script(const std::vector<std::string>& dns_servers, int seconds) {
    const std::string t = " timeout " + std::to_string(seconds) + "s";
    std::string s = "add element " + kTable + " captive_tcp { 80" + t + ", 443" + t + " }\n";
    for (const std::string& a : dns_servers) {
        bool v6 = false;
        auto n = normalise_ip(a, &v6);
        if (!n) continue;
        s += "add element " + kTable + (v6 ? " captive_dns6 { " : " captive_dns4 { ") + *n + t + " }\n";
    }
    return s;
}

std::vector<IpPrefix> attached_networks(const std::string& tun_name) {
    std::vector<IpPrefix> out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (ifaddrs* a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || !a->ifa_netmask || (a->ifa_flags & IFF_LOOPBACK)) continue;
        if (tun_name == a->ifa_name) continue;
        const int family = a->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        IpPrefix p;
        p.v6 = family == AF_INET6;
        auto bytes_of = [&p](const sockaddr* sa) {
            return p.v6 ? reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr)
                        : reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
        };
        const std::uint8_t* addr = bytes_of(a->ifa_addr);
        const std::uint8_t* mask = bytes_of(a->ifa_netmask);
        const int bytes = p.v6 ? 16 : 4;
        if (p.v6 && addr[0] == 0xfe && (addr[1] & 0xc0) == 0x80) continue;  // link-local: ND covers it
        for (int i = 0; i < bytes; ++i) {
            p.bytes[i] = addr[i] & mask[i];
            p.length += __builtin_popcount(mask[i]);
        }
        bool seen = false;
        for (const IpPrefix& q : out) seen = seen || q == p;
        if (!seen) out.push_back(p);
    }
    ::freeifaddrs(list);
    return out;
}

std::optional<int> kill_switch_left_behind() {
    Nft nft;
    auto listing = nft.run("list table " + kTable);
    if (!listing) return std::nullopt;  // no such table (or no nftables at all)
    std::smatch m;
    static const std::regex re("comment \"espvpn pid ([0-9]+)");
    if (std::regex_search(*listing, m, re)) return std::stoi(m[1].str());
    return 0;
}

Result<std::unique_ptr<KillSwitch>> KillSwitch::install(const KillSwitchRules& rules) {
    if (auto left = kill_switch_left_behind()) {
        if (*left != rules.pid && pid_alive(*left))
            return make_error("--kill-switch: espvpn pid " + std::to_string(*left) +
                              " holds the kill switch (nftables table inet " + kKillSwitchTable +
                              "); two kill switches would block each other's tunnel");
        LOG_WARN << "kill switch: replacing the table espvpn pid " << *left
                 << " left behind (it did not exit cleanly; traffic stayed blocked since)";
    }
    Nft nft;
    auto done = nft.run(kill_switch_script(rules));
    if (!done) return make_error("--kill-switch: " + done.error().message);
    LOG_INFO << "kill switch on: only " << rules.tun_name << ", the gateway"
             << (rules.tcp_services.empty() ? "" : ", the portal (TCP to its port)")
             << (rules.allowed.empty() ? "" : ", the allowed prefixes")
             << ", loopback, DHCP and neighbour discovery (nftables table inet " << kKillSwitchTable << ")";
    return std::unique_ptr<KillSwitch>(new KillSwitch());
}

Status KillSwitch::replace(const KillSwitchRules& rules) {
    Nft nft;
    auto done = nft.run(kill_switch_script(rules));
    if (!done) return make_error("--kill-switch: " + done.error().message);
    LOG_INFO << "kill switch: the rules made again for " << rules.tun_name << " and the gateway (no gap)";
    return {};
}

Status KillSwitch::open_captive_exception(const std::vector<std::string>& dns_servers, int seconds) {
    Nft nft;
    auto done = nft.run(captive_exception_script(dns_servers, seconds));
    if (!done) return make_error("kill switch: captive-portal exception: " + done.error().message);
    return {};
}

Status KillSwitch::close_captive_exception() {
    Nft nft;
    auto done = nft.run("flush set " + kTable + " captive_tcp\nflush set " + kTable + " captive_dns4\nflush set " +
                        kTable + " captive_dns6\n");
    if (!done) return make_error("kill switch: closing the captive-portal exception: " + done.error().message);
    return {};
}

KillSwitch::~KillSwitch() {
    Nft nft;
    auto listing = nft.run("list table " + kTable);
    if (listing)
        LOG_INFO << "kill switch off: it blocked " << counted_packets(*listing, "blocked out") << " packets out, "
                 << counted_packets(*listing, "blocked in") << " in";
    if (auto gone = nft.run("delete table " + kTable); !gone)
        LOG_ERROR << "kill switch: cannot remove its rules (" << gone.error().message
                  << "); remove them with: nft delete table inet " << kKillSwitchTable;
}

std::string remove_left_behind_kill_switch() {
    auto left = kill_switch_left_behind();
    if (!left) return {};
    if (pid_alive(*left) && *left != ::getpid())
        return "the kill switch of espvpn pid " + std::to_string(*left) +
               " (still running) blocks traffic outside its tunnel, this one's too";
    Nft nft;
    if (auto gone = nft.run("delete table " + kTable); !gone)
        return "a kill switch left by espvpn pid " + std::to_string(*left) + " still blocks traffic: " +
               gone.error().message;
    return "removed the kill switch espvpn pid " + std::to_string(*left) +
           " left behind (it did not exit cleanly; traffic outside its tunnel was blocked until now)";
}

}  // namespace espvpn::host
