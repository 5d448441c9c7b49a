// Test program: UdpSocket GSO send / GRO receive between two namespaces.
//
//   udp_gso_check NETNS_A NETNS_B ADDR_A ADDR_B   (addresses without port)
// Sends batches of datagrams from A to B (equal sizes, then mixed sizes) and
// checks that every datagram arrives once, in order, with its size and bytes,
// that the sender used UDP_SEGMENT messages and that the receiver got GRO
// buffers; then the same without GSO/GRO. Exit 0 on success.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "src/io/udp_socket.h"

using namespace espvpn;
using namespace espvpn::io;

namespace {
int failures = 0;
#define EXPECT(cond, ...)                               \
    do {                                                \
        if (!(cond)) {                                  \
            std::printf("FAIL %s: ", #cond);            \
            std::printf(__VA_ARGS__);                   \
            std::printf("\n");                          \
            ++failures;                                 \
        }                                               \
    } while (0)

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "udp_gso_check: %s\n", what.c_str());
    std::exit(1);
}

void enter(const std::string& netns) {
    int fd = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) die("setns " + netns + ": " + std::strerror(errno));
    ::close(fd);
}

std::string with_port(const std::string& addr, int port) {
    return addr.find(':') != std::string::npos ? "[" + addr + "]:" + std::to_string(port)
                                               : addr + ":" + std::to_string(port);
}

std::uint8_t byte_at(std::size_t datagram, std::size_t i) { return std::uint8_t(datagram * 31 + i * 7 + (i >> 8)); }

void run(const char* label, UdpSocket& tx, UdpSocket& rx, const std::vector<std::size_t>& sizes, bool expect_offload) {
    PacketBatch out({sizes.size(), 2048, 32, 64});
    for (std::size_t d = 0; d < sizes.size(); ++d) {
        auto room = out.next_room();
        for (std::size_t i = 0; i < sizes[d]; ++i) room[i] = byte_at(d, i);
        out.commit(sizes[d]);
    }
    UdpCounters before_tx = tx.counters(), before_rx = rx.counters();
    SendOutcome s = tx.send_batch(out);
    EXPECT(s.status == SendStatus::ok && s.sent == sizes.size(), "%s: sent %zu of %zu (errno %d)", label, s.sent,
           sizes.size(), s.error);
    std::size_t calls = tx.counters().send_calls - before_tx.send_calls;
    std::size_t gso_msgs = tx.counters().gso_messages - before_tx.gso_messages;
    std::printf("%s: %zu datagrams sent in %zu sendmmsg call(s), %zu GSO message(s)\n", label, s.sent, calls, gso_msgs);
    EXPECT(calls == 1, "%s: one sendmmsg call expected, got %zu", label, calls);
    if (expect_offload) EXPECT(gso_msgs >= 1, "%s: no GSO message", label);

    PacketBatch in({sizes.size() + 8, 2048, 32, 64});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (in.size() < sizes.size() && std::chrono::steady_clock::now() < deadline) {
        if (!rx.wait_readable(100)) continue;
        auto r = rx.recv_batch(in);
        if (!r) die(r.error().message);
    }
    std::size_t gro = rx.counters().gro_buffers - before_rx.gro_buffers;
    std::size_t calls_rx = rx.counters().receive_calls - before_rx.receive_calls;
    std::printf("%s: %zu datagrams received in %zu recvmmsg call(s), %zu GRO buffer(s)\n", label, in.size(), calls_rx, gro);
    EXPECT(in.size() == sizes.size(), "%s: received %zu of %zu", label, in.size(), sizes.size());
    if (expect_offload) EXPECT(gro >= 1, "%s: no GRO buffer received", label);
    for (std::size_t d = 0; d < std::min(in.size(), sizes.size()); ++d) {
        auto p = in.packet(d);
        EXPECT(p.size() == sizes[d], "%s: datagram %zu has %zu bytes, expected %zu", label, d, p.size(), sizes[d]);
        bool same = p.size() == sizes[d];
        for (std::size_t i = 0; same && i < p.size(); ++i) same = p[i] == byte_at(d, i);
        EXPECT(same, "%s: datagram %zu content differs", label, d);
    }
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) die("usage: udp_gso_check NETNS_A NETNS_B ADDR_A ADDR_B");
    std::string a = with_port(argv[3], 4501), b = with_port(argv[4], 4501);
    std::string a2 = with_port(argv[3], 4502), b2 = with_port(argv[4], 4502);
    auto open = [](const std::string& local, const std::string& remote, bool offload) {
        UdpOptions o;
        o.local = local;
        o.remote = remote;
        o.gso = o.gro = offload;
        auto s = UdpSocket::open(o);
        if (!s) die(s.error().message);
        return std::move(*s);
    };
    enter(argv[2]);
    UdpSocket rx = open(b, a, true);
    UdpSocket rx_plain = open(b2, a2, false);
    enter(argv[1]);
    UdpSocket tx = open(a, b, true);
    UdpSocket tx_plain = open(a2, b2, false);
    std::printf("kernel: UDP_SEGMENT %s, UDP_GRO %s\n", tx.gso() ? "yes" : "no", rx.gro() ? "yes" : "no");
    EXPECT(tx.gso() && rx.gro(), "this kernel should support UDP GSO and GRO");

    std::vector<std::size_t> equal(40, 1200);
    equal.back() = 700;  // the last segment of a GSO message may be shorter
    run("equal sizes", tx, rx, equal, true);
    std::vector<std::size_t> mixed = {1200, 1200, 1200, 800, 1400, 1400, 100, 100, 100, 1, 1300};
    run("mixed sizes", tx, rx, mixed, true);
    std::vector<std::size_t> many(200, 1000);  // more than UDP_MAX_SEGMENTS: several GSO messages
    run("200 datagrams", tx, rx, many, true);
    run("no offload", tx_plain, rx_plain, equal, false);
    const UdpCounters& c = tx.counters();
    EXPECT(c.drop_would_block + c.drop_no_buffers + c.drop_unreachable + c.drop_other == 0, "unexpected send drops");
    std::printf(failures ? "FAILED\n" : "PASS\n");
    return failures ? 1 : 0;
}
