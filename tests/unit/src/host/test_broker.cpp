#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

#include "protocols/broker/broker_message.h"
#include "src/host/broker.h"
#include "src/host/broker_client.h"
#include "src/io/seqpacket.h"

using namespace espvpn;
using namespace espvpn::host;

namespace {

std::string temp_dir() {
    char tmpl[] = "/tmp/broker-test.XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    return tmpl;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `session` in a forked child talking to a broker served here; returns how it ended.
template <class F>
SessionEnd serve(const BrokerOptions& options, F session) {
    io::UniqueFd rb, rs, eb, es;
    REQUIRE(io::seqpacket_pair(rb, rs).ok());
    REQUIRE(io::seqpacket_pair(eb, es).ok());
    sigset_t old;
    block_broker_signals(&old);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        rb.reset();
        eb.reset();
        _exit(session(std::move(rs), std::move(es)));
    }
    rs.reset();
    es.reset();
    SessionEnd end = run_broker(std::move(rb), std::move(eb), child, options);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return end;
}

}  // namespace

TEST_CASE("broker: state files only where registered before the split") {
    BrokerOptions o;
    o.state_files = {"/var/lib/espvpn/token"};
    o.state_dir = "/var/lib/espvpn/0/";
    CHECK(state_path_allowed(o, "/var/lib/espvpn/token"));
    CHECK(state_path_allowed(o, "/var/lib/espvpn/0/portal-vpn.example.com.cookie"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/token2"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0/../../../etc/shadow"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0/.."));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0/sub/file"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0/"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0x"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0/a b"));
    CHECK_FALSE(state_path_allowed(o, "/var/lib/espvpn/0/" + std::string(129, 'a')));
    CHECK_FALSE(state_path_allowed(BrokerOptions{}, "/anything"));
}

TEST_CASE("broker: garbage and requests out of order get an error answer, the state files go where allowed") {
    const std::string dir = temp_dir();
    BrokerOptions o;
    o.state_files = {dir + "/stats.json"};
    o.state_dir = dir + "/cache";
    REQUIRE(mkdir((dir + "/cache").c_str(), 0700) == 0);
    REQUIRE(symlink("/etc/passwd", (dir + "/cache/link").c_str()) == 0);
    const SessionEnd end = serve(o, [&](io::UniqueFd fd, io::UniqueFd) -> int {
        // Not a message: an error answer, and the broker goes on.
        const std::uint8_t junk[] = {0, 1, 0, 99, 1, 2, 3};
        if (!io::send_packet(fd.get(), junk)) return 10;
        auto got = io::receive_packet(fd.get(), broker::kMaxMessage);
        if (!got || got->eof) return 11;
        auto m = broker::decode(got->bytes);
        if (!m || !std::holds_alternative<broker::Reply>(*m) || std::get<broker::Reply>(*m).ok) return 12;
        const int ch_fd = fd.get();
        BrokerChannel ch(std::move(fd));
        // Before the tun is up: no route, no script, no DNS.
        if (ch.ask(broker::AddDomainRoute{*IpPrefix::parse("10.0.0.1"), true}).ok()) return 20;
        if (ch.ask(broker::PointDnsAt{""}).ok()) return 21;
        if (ch.ask(broker::SetMtu{1400}).ok()) return 22;
        if (ch.ask(broker::OpenDnsListener{"127.0.0.1", 53, ""}).ok()) return 23;
        // State files: only the registered ones.
        if (ch.write_state("/tmp/not-registered", {'x'}, false, 0644).ok()) return 30;
        if (!ch.write_state(dir + "/stats.json", {'{', '}'}, false, 0644).ok()) return 31;
        if (!ch.write_state(dir + "/cache/c1", {'s'}, true, 0600).ok()) return 32;
        auto r = ch.read_state(dir + "/cache/c1");
        if (!r || !*r || (*r)->bytes != std::vector<std::uint8_t>{'s'} || (*r)->mode != 0600) return 33;
        auto none = ch.read_state(dir + "/cache/none");
        if (!none || *none) return 34;
        if (ch.read_state(dir + "/cache/link").ok()) return 35;  // a symlink is refused, not followed
        if (ch.read_state(dir + "/cache/../stats.json").ok()) return 36;
        auto removed = ch.remove_state(dir + "/cache/c1");
        if (!removed || !*removed) return 37;
        auto again = ch.remove_state(dir + "/cache/c1");
        if (!again || *again) return 38;
        // The same through the io::StateFiles-shaped adapter.
        BrokerStateFiles files(std::make_shared<BrokerChannel>(io::UniqueFd(dup(ch_fd))));
        if (!files.write(dir + "/cache/c2", "cookie", io::Sync::no, 0600).ok()) return 50;
        auto f = files.read(dir + "/cache/c2");
        if (!f || !*f || (*f)->bytes.reveal_text() != "cookie" || (*f)->uid != geteuid()) return 51;
        auto gone = files.remove(dir + "/cache/c2");
        if (!gone || !*gone) return 52;
        // Neither the session itself (no such directory) nor the broker (not registered) writes it.
        if (files.write("/nonexistent-espvpn-test/not-registered", "x", io::Sync::no, 0600).ok()) return 53;
        // A UDP socket comes back as a descriptor.
        auto udp = ch.open_udp(AF_INET, 1 << 20, 1 << 20);
        if (!udp || !udp->valid()) return 40;
        int type = 0;
        socklen_t len = sizeof type;
        if (getsockopt(udp->get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_DGRAM) return 41;
        return 7;
    });
    CHECK(end.exited);
    CHECK(end.code == 7);  // anything else: the step that failed
    CHECK(slurp(dir + "/stats.json") == "{}");
    CHECK(access((dir + "/cache/c1").c_str(), F_OK) != 0);
    CHECK(slurp("/etc/passwd").size() > 0);
    CHECK(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("broker: a session killed by a signal is reported as such") {
    const SessionEnd end = serve(BrokerOptions{}, [](io::UniqueFd, io::UniqueFd) -> int {
        ::raise(SIGSYS);
        return 0;
    });
    CHECK_FALSE(end.exited);
    CHECK(end.signal == SIGSYS);
}

TEST_CASE("broker: a signal sent to the broker reaches the session as an event") {
    const SessionEnd end = serve(BrokerOptions{}, [](io::UniqueFd, io::UniqueFd events) -> int {
        ::kill(getppid(), SIGUSR2);  // as `kill -USR2 BROKER` does (SI_USER)
        auto got = io::receive_packet(events.get(), 64);
        if (!got || got->eof) return 1;
        auto m = broker::decode(got->bytes);
        if (!m || !std::holds_alternative<broker::SignalEvent>(*m)) return 2;
        return std::get<broker::SignalEvent>(*m).signo == SIGUSR2 ? 9 : 3;
    });
    CHECK(end.exited);
    CHECK(end.code == 9);
}
