#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "protocols/anyconnect/connect.h"
#include "protocols/gp/tunnel_config.h"
#include "protocols/http/response_parser.h"
#include "src/host/dns.h"

using namespace espvpn;
using namespace espvpn::host;

namespace {

DnsSettings vpn_dns() {
    DnsSettings s;
    s.interface_name = "tun7";
    s.ifindex = 7;
    s.servers = {"10.0.0.53", "fd00::53", "10.0.0.54", "10.0.0.55"};
    s.search_domains = {"corp.example", "lab.example"};
    s.vpn_pid = 4242;
    return s;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

struct TempFile {
    std::string path;
    explicit TempFile(const std::string& text) {
        char name[] = "/tmp/espvpn-resolv-XXXXXX";
        int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
        close(fd);
        path = name;
    }
    ~TempFile() { unlink(path.c_str()); }
};

struct TempDir {
    std::string path;
    TempDir() {
        char name[] = "/tmp/espvpn-dnsbak-XXXXXX";
        REQUIRE(mkdtemp(name) != nullptr);
        path = name;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    bool has(const std::string& file) const { return access((path + "/" + file).c_str(), F_OK) == 0; }
};

// A pid that no process has now: a child that has exited and been reaped.
int dead_pid() {
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(0);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    return child;
}

// A process that lives until end(): stands for another espvpn.
struct LiveChild {
    pid_t pid = fork();
    LiveChild() {
        REQUIRE(pid >= 0);
        if (pid == 0) {
            pause();
            _exit(0);
        }
    }
    void end() {
        if (pid <= 0) return;
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = 0;
    }
    ~LiveChild() { end(); }
};

// The resolv.conf backend on a test file, its backups in `backup_dir` ("" = none).
HostDnsOptions file_options(const std::string& path, const std::string& backup_dir) {
    HostDnsOptions o;
    o.try_resolved = false;
    o.resolv_conf = path;
    o.backup_dir = backup_dir;
    return o;
}

const char* kOriginal =
    "# from DHCP\n"
    "nameserver 192.168.1.1\n"
    "nameserver 192.168.1.2\n"
    "search home.example\n"
    "options edns0 timeout:2\n";

}  // namespace

TEST_CASE("resolv.conf: the VPN's servers only (at most 3), its domains first, other lines kept") {
    std::string text = compose_resolv_conf(kOriginal, vpn_dns());
    CHECK(text.find("nameserver 10.0.0.53\nnameserver fd00::53\nnameserver 10.0.0.54\n") != std::string::npos);
    CHECK(text.find("10.0.0.55") == std::string::npos);
    CHECK(text.find("192.168.1.") == std::string::npos);
    CHECK(text.find("search corp.example lab.example home.example\n") != std::string::npos);
    CHECK(text.find("options edns0 timeout:2\n") != std::string::npos);
    CHECK(text.find("pid 4242") != std::string::npos);
}

TEST_CASE("built-in settings: a split-DNS name that is also a search domain is not made routing-only") {
    TunnelConfig c;
    c.dns = {"192.168.99.1"};
    c.default_domain = "example.test corp.test";
    c.split_dns = {"example.test", "lab.test", "lab.test"};
    c.split_include = {*IpPrefix::parse("10.1.0.0/16")};  // a split tunnel
    DnsSettings s = built_in_dns_settings(c, "tun0", 3, 1);
    CHECK(s.search_domains == std::vector<std::string>{"example.test", "corp.test"});
    CHECK(s.routing_domains == std::vector<std::string>{"lab.test"});
    CHECK_FALSE(s.default_route);
    c.default_domain.clear();
    c.split_dns = {"example.test"};
    s = built_in_dns_settings(c, "tun0", 3, 1);
    CHECK(s.search_domains.empty());
    CHECK(s.routing_domains == std::vector<std::string>{"example.test"});
    CHECK_FALSE(s.default_route);
}

TEST_CASE("resolv.conf: a repeated search domain is written once") {
    std::string text = compose_resolv_conf("search corp.example\n", vpn_dns());
    CHECK(text.find("search corp.example lab.example\n") != std::string::npos);
}

TEST_CASE("resolv.conf backend: rewritten while applied, restored byte for byte after") {
    TempFile f(kOriginal);
    TempDir backups;
    const HostDnsOptions o = file_options(f.path, backups.path);
    {
        auto dns = HostDns::apply(vpn_dns(), o);
        REQUIRE(dns);
        CHECK((*dns)->method() == "resolv.conf");
        CHECK(slurp(backups.path + "/resolv.conf.4242") == kOriginal);  // for the next espvpn, if this one dies
        CHECK(slurp(f.path) == compose_resolv_conf(kOriginal, vpn_dns()));
    }
    CHECK(slurp(f.path) == kOriginal);
    CHECK_FALSE(backups.has("resolv.conf.4242"));
}

TEST_CASE("resolv.conf backend: the file of an espvpn that died without restoring it is undone by the next one") {
    TempDir backups;
    DnsSettings dead = vpn_dns();
    dead.vpn_pid = dead_pid();
    dead.servers = {"10.9.9.9"};
    dead.search_domains = {"stale.example"};
    TempFile f(compose_resolv_conf(kOriginal, dead));  // what the killed one left behind
    std::ofstream(backups.path + "/resolv.conf." + std::to_string(dead.vpn_pid)) << kOriginal;
    const HostDnsOptions o = file_options(f.path, backups.path);
    {
        auto dns = HostDns::apply(vpn_dns(), o);
        REQUIRE(dns);
        CHECK(slurp(f.path) == compose_resolv_conf(kOriginal, vpn_dns()));  // no stale servers or domains
        CHECK_FALSE(backups.has("resolv.conf." + std::to_string(dead.vpn_pid)));
    }
    CHECK(slurp(f.path) == kOriginal);
}

TEST_CASE("resolv.conf backend: two espvpns at once, the first one ends first: the original comes back") {
    TempFile f(kOriginal);
    TempDir backups;
    const HostDnsOptions o = file_options(f.path, backups.path);
    LiveChild other;
    DnsSettings first = vpn_dns();
    first.vpn_pid = other.pid;
    first.search_domains = {"first.example"};
    auto a = HostDns::apply(first, o);
    REQUIRE(a);
    auto b = HostDns::apply(vpn_dns(), o);  // stacks on the first one's file
    REQUIRE(b);
    CHECK(slurp(f.path).find("first.example") != std::string::npos);
    a->reset();  // the file is the second one's now: left alone, the first one's backup kept
    CHECK(backups.has("resolv.conf." + std::to_string(first.vpn_pid)));
    other.end();  // and its process is gone by the time the second one ends
    b->reset();  // puts back not the first one's file but what it had replaced
    CHECK(slurp(f.path) == kOriginal);
    CHECK_FALSE(backups.has("resolv.conf." + std::to_string(first.vpn_pid)));
    CHECK_FALSE(backups.has("resolv.conf.4242"));
}

TEST_CASE("resolv.conf backend: a live espvpn's file, or a dead one's without a backup, counts as the original") {
    TempDir backups;
    for (int pid : {static_cast<int>(getppid()), dead_pid()}) {
        DnsSettings other = vpn_dns();
        other.vpn_pid = pid;
        other.search_domains = {"other.example"};
        const std::string left = compose_resolv_conf(kOriginal, other);
        TempFile f(left);
        const HostDnsOptions o = file_options(f.path, backups.path);
        if (pid == static_cast<int>(getppid()))  // alive: its backup must not be taken from it
            std::ofstream(backups.path + "/resolv.conf." + std::to_string(pid)) << kOriginal;
        {
            auto dns = HostDns::apply(vpn_dns(), o);
            REQUIRE(dns);
            CHECK(slurp(f.path) == compose_resolv_conf(left, vpn_dns()));
        }
        CHECK(slurp(f.path) == left);
    }
    CHECK(backups.has("resolv.conf." + std::to_string(getppid())));
}

TEST_CASE("resolv.conf backend: a file changed by someone else meanwhile is left alone") {
    TempFile f(kOriginal);
    const HostDnsOptions o = file_options(f.path, "");  // no backup at all
    {
        auto dns = HostDns::apply(vpn_dns(), o);
        REQUIRE(dns);
        std::ofstream(f.path) << "nameserver 9.9.9.9\n";
    }
    CHECK(slurp(f.path) == "nameserver 9.9.9.9\n");
}

TEST_CASE("resolv.conf backend: a missing file is a clear error") {
    auto dns = HostDns::apply(vpn_dns(), file_options("/nonexistent/espvpn/resolv.conf", ""));
    REQUIRE(!dns);
    CHECK(dns.error().message.find("/nonexistent/espvpn/resolv.conf") != std::string::npos);
}

namespace {

// The TunnelConfig each protocol's parser makes of a gateway's reply.
TunnelConfig gp_config(const std::string& inner) {
    auto r = gp::parse_tunnel_config_reply("<response status=\"success\"><ip-address>10.0.0.2</ip-address>"
                                           "<dns><member>10.0.0.53</member></dns>" + inner + "</response>");
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    REQUIRE(std::holds_alternative<gp::GpTunnelConfig>(*r));
    return std::get<gp::GpTunnelConfig>(*r).tunnel;
}

TunnelConfig ac_config(const std::string& headers) {
    http::ResponseParser p;
    p.begin("CONNECT");
    std::string text = "HTTP/1.1 200 CONNECTED\r\nX-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 1400\r\n"
                       "X-CSTP-DNS: 10.0.0.53\r\n" + headers + "\r\n";
    auto used = p.feed(text);
    REQUIRE_MESSAGE(used.ok(), used.error().message);
    REQUIRE(p.done());
    auto r = anyconnect::parse_connect_reply(p.take_response());
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    return r->tunnel;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("built-in settings, GP full tunnel: every name to the VPN even with search domains; those stay searched") {
    DnsSettings s = built_in_dns_settings(
        gp_config("<dns-suffix><member>corp.test</member><member>lab.test</member></dns-suffix>"
                  "<include-split-tunneling-domain><member>wiki.test</member></include-split-tunneling-domain>"),
        "tun0", 3, 1);
    CHECK(s.full_tunnel);
    CHECK(s.default_route);
    CHECK(s.servers == Names{"10.0.0.53"});
    CHECK(s.search_domains == Names{"corp.test", "lab.test"});
    CHECK(s.routing_domains == Names{"wiki.test"});
    // A 0.0.0.0/0 among the access routes is a full tunnel too.
    s = built_in_dns_settings(gp_config("<dns-suffix><member>corp.test</member></dns-suffix><access-routes>"
                                        "<member>10.1.0.0/16</member><member>0.0.0.0/0</member></access-routes>"),
                              "tun0", 3, 1);
    CHECK(s.default_route);
    CHECK(s.search_domains == Names{"corp.test"});
}

TEST_CASE("built-in settings, GP split tunnel: only the gateway's domains, plain include-domain entries routed") {
    DnsSettings s = built_in_dns_settings(
        gp_config("<dns-suffix><member>corp.test</member></dns-suffix>"
                  "<access-routes><member>10.1.0.0/16</member></access-routes>"
                  "<include-split-tunneling-domain><member>wiki.test</member><member>*.apps.test</member>"
                  "<member>git.test:443</member><member>corp.test</member><member>*</member>"
                  "</include-split-tunneling-domain>"
                  "<exclude-split-tunneling-domain><member>www.wiki.test</member></exclude-split-tunneling-domain>"),
        "tun0", 3, 1);
    CHECK_FALSE(s.full_tunnel);
    CHECK_FALSE(s.default_route);
    CHECK(s.search_domains == Names{"corp.test"});
    CHECK(s.routing_domains == Names{"wiki.test"});  // "*."/":port"/"*" entries are about traffic
    // Only search domains: those, no default route.
    s = built_in_dns_settings(gp_config("<dns-suffix><member>corp.test</member></dns-suffix>"
                                        "<access-routes><member>10.1.0.0/16</member></access-routes>"),
                              "tun0", 3, 1);
    CHECK_FALSE(s.default_route);
    CHECK(s.routing_domains.empty());
    // No domain at all: the VPN's servers get every name (they are the only ones it names).
    s = built_in_dns_settings(gp_config("<access-routes><member>10.1.0.0/16</member></access-routes>"), "tun0", 3, 1);
    CHECK(s.default_route);
}

TEST_CASE("built-in settings with the wildcard domains' forwarder: it is the one server, their domains go to it") {
    const std::string lists = "<dns-suffix><member>corp.test</member></dns-suffix>"
                              "<access-routes><member>10.1.0.0/16</member></access-routes>"
                              "<include-split-tunneling-domain><member>wiki.test</member><member>*.apps.test</member>"
                              "</include-split-tunneling-domain><exclude-split-tunneling-domain>"
                              "<member>*.cdn.test</member></exclude-split-tunneling-domain>";
    DnsSettings s = built_in_dns_settings(gp_config(lists), "tun0", 3, 1, "10.0.0.9");
    CHECK(s.servers == Names{"10.0.0.9"});
    CHECK(s.search_domains == Names{"corp.test"});
    CHECK(s.routing_domains == Names{"wiki.test", "apps.test", "cdn.test"});
    CHECK_FALSE(s.default_route);
    CHECK(built_in_dns_settings(gp_config(lists), "tun0", 3, 1).servers == Names{"10.0.0.53"});
    // A bare "*": every name.
    s = built_in_dns_settings(gp_config("<access-routes><member>10.1.0.0/16</member></access-routes>"
                                        "<dns-suffix><member>corp.test</member></dns-suffix>"
                                        "<include-split-tunneling-domain><member>*</member>"
                                        "</include-split-tunneling-domain>"),
                              "tun0", 3, 1, "10.0.0.9");
    CHECK(s.default_route);
}

TEST_CASE("built-in settings, AnyConnect: full tunnel routes every name; split tunnel only the split-DNS names") {
    DnsSettings full = built_in_dns_settings(
        ac_config("X-CSTP-Default-Domain: example.test\r\nX-CSTP-Split-DNS: example.test\r\n"
                  "X-CSTP-Split-DNS: lab.test\r\n"),
        "tun0", 3, 1);
    CHECK(full.full_tunnel);
    CHECK(full.default_route);
    CHECK(full.search_domains == Names{"example.test"});
    CHECK(full.routing_domains == Names{"lab.test"});
    // A default route among the split-include routes is a full tunnel too.
    full = built_in_dns_settings(
        ac_config("X-CSTP-Split-DNS: lab.test\r\nX-CSTP-Split-Include: 10.1.0.0/255.255.0.0\r\n"
                  "X-CSTP-Split-Include: 0.0.0.0/0.0.0.0\r\n"),
        "tun0", 3, 1);
    CHECK(full.full_tunnel);
    CHECK(full.default_route);
    DnsSettings split = built_in_dns_settings(
        ac_config("X-CSTP-Default-Domain: example.test\r\nX-CSTP-Split-DNS: example.test\r\n"
                  "X-CSTP-Split-DNS: lab.test\r\nX-CSTP-Split-Include: 10.1.0.0/255.255.0.0\r\n"),
        "tun0", 3, 1);
    CHECK_FALSE(split.full_tunnel);
    CHECK_FALSE(split.default_route);
    CHECK(split.search_domains == Names{"example.test"});
    CHECK(split.routing_domains == Names{"lab.test"});
    // Split tunnel with split DNS only (no default domain).
    split = built_in_dns_settings(
        ac_config("X-CSTP-Split-DNS: lab.test\r\nX-CSTP-Split-Include: 10.1.0.0/255.255.0.0\r\n"), "tun0", 3, 1);
    CHECK(split.search_domains.empty());
    CHECK(split.routing_domains == Names{"lab.test"});
    CHECK_FALSE(split.default_route);
}

// Issue 41: the backups are files espvpn made; a symlink in their place is never read.
TEST_CASE("resolv.conf backend: a symlink planted as a dead espvpn's backup is not restored from") {
    TempDir backups;
    DnsSettings dead = vpn_dns();
    dead.vpn_pid = dead_pid();
    TempFile f(compose_resolv_conf(kOriginal, dead));
    TempFile chosen("nameserver 203.0.113.66\n");  // what the planter wants in resolv.conf
    const std::string planted = backups.path + "/resolv.conf." + std::to_string(dead.vpn_pid);
    REQUIRE(::symlink(chosen.path.c_str(), planted.c_str()) == 0);
    const HostDnsOptions o = file_options(f.path, backups.path);
    {
        auto dns = HostDns::apply(vpn_dns(), o);
        REQUIRE(dns);
    }
    CHECK(slurp(f.path).find("203.0.113.66") == std::string::npos);
    ::unlink(planted.c_str());
}
