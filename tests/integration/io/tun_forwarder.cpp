// Test program: forwards packets between two tun devices living in two network
// namespaces through TunDevice (split on read, coalesce on write), so traffic
// between the namespaces exercises the whole offload path.
//
//   tun_forwarder NETNS_A NETNS_B NAME_A NAME_B [--no-offload] [--seconds N]
// A name of "-" lets the kernel choose one; an existing persistent tun is attached to.
// A gets 10.99.0.1 / fd99::1, B gets 10.99.0.2 / fd99::2, MTU 1400, routes to
// each other. Prints "ready" once both are up, counters on exit (SIGTERM).
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "src/io/tun_device.h"

using namespace espvpn;
using namespace espvpn::io;

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "tun_forwarder: %s\n", what.c_str());
    std::exit(1);
}

void check(const Status& s) {
    if (!s) die(s.error().message);
}

TunDevice open_in(const std::string& netns, const std::string& name, bool offload, const char* self4,
                  const char* peer4, const char* self6, const char* peer6) {
    int fd = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) die("setns " + netns + ": " + std::strerror(errno));
    ::close(fd);
    TunOptions o;
    o.name = name == "-" ? "" : name;  // "-": let the kernel pick tunN
    o.offload = offload;
    auto tun = TunDevice::open(o);
    if (!tun) die(tun.error().message);
    check(tun->set_mtu(1400));
    check(tun->add_address(*InterfaceAddress::parse(self4)));
    check(tun->add_address(*InterfaceAddress::parse(self6)));
    check(tun->set_up(true));
    check(tun->add_route(*InterfaceAddress::parse(peer4)));
    check(tun->add_route(*InterfaceAddress::parse(peer6)));
    return std::move(*tun);
}

void forward(TunDevice& from, TunDevice& to, std::atomic<std::uint64_t>& errors) {
    PacketBatch batch({64, 65535, 32, 0});
    while (!g_stop) {
        if (!from.wait_readable(100)) continue;
        auto n = from.read_packets(batch);
        if (!n) {
            std::fprintf(stderr, "read: %s\n", n.error().message.c_str());
            ++errors;
            return;
        }
        if (batch.size() == 0) continue;
        auto w = to.write_packets(batch);
        if (!w) {
            std::fprintf(stderr, "write: %s\n", w.error().message.c_str());
            ++errors;
            return;
        }
        batch.clear();
    }
}

void print(const char* label, const TunDevice& t) {
    const TunCounters& c = t.counters();
    std::printf("%s %s: vnet_hdr=%d tso=%d uso=%d reads=%llu super_packets=%llu packets_out=%llu "
                "writes=%llu packets_in=%llu write_errors=%llu split_drops=%llu\n",
                label, t.name().c_str(), t.offloads().vnet_hdr, t.offloads().tso, t.offloads().uso,
                (unsigned long long)c.reads, (unsigned long long)c.super_packets,
                (unsigned long long)c.packets_out, (unsigned long long)c.writes,
                (unsigned long long)c.packets_in, (unsigned long long)c.write_errors,
                (unsigned long long)c.split_drop_total());
}
}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) die("usage: tun_forwarder NETNS_A NETNS_B NAME_A NAME_B [--no-offload] [--seconds N]");
    bool offload = true;
    int seconds = 120;
    for (int i = 5; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--no-offload") offload = false;
        else if (a == "--seconds" && i + 1 < argc) seconds = std::atoi(argv[++i]);
        else die("unknown argument " + a);
    }
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    TunDevice a = open_in(argv[1], argv[3], offload, "10.99.0.1/32", "10.99.0.2/32", "fd99::1/128", "fd99::2/128");
    TunDevice b = open_in(argv[2], argv[4], offload, "10.99.0.2/32", "10.99.0.1/32", "fd99::2/128", "fd99::1/128");
    std::printf("ready\n");
    std::fflush(stdout);
    std::atomic<std::uint64_t> errors{0};
    std::thread ab([&] { forward(a, b, errors); });
    std::thread ba([&] { forward(b, a, errors); });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!g_stop && errors == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g_stop = true;
    ab.join();
    ba.join();
    print("A", a);
    print("B", b);
    return errors == 0 ? 0 : 1;
}
