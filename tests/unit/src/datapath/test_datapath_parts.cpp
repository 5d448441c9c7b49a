// Unit tests of the datapath's pure parts: handover queue, ICMP too-big
// answers, stats output, the SA env file, batch compaction.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "src/datapath/udp_send.h"
#include "src/datapath/esp/esp_datapath.h"
#include "src/datapath/dtls/dtls_datapath.h"
#include "src/datapath/stats_reporter.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/handover_queue.h"
#include "src/datapath/rx_linger.h"
#include "src/datapath/too_big.h"
#include "src/io/packet_batch.h"
#include "tests/unit/state_files_fake.h"
#include "tools/esp-gateway/sa_env_file.h"

using namespace espvpn;
using namespace espvpn::datapath;

namespace {
// Ones' complement sum over a range must fold to 0xffff when its checksum is right.
std::uint16_t sum16(const std::uint8_t* p, std::size_t n, std::uint32_t acc = 0) {
    for (std::size_t i = 0; i + 1 < n; i += 2) acc += (p[i] << 8) | p[i + 1];
    if (n & 1) acc += p[n - 1] << 8;
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return static_cast<std::uint16_t>(acc);
}

std::vector<std::uint8_t> ipv4_packet(std::size_t size, bool df, std::uint8_t proto = 17) {
    std::vector<std::uint8_t> p(size, 0xab);
    std::memset(p.data(), 0, 20);
    p[0] = 0x45;
    p[2] = static_cast<std::uint8_t>(size >> 8);
    p[3] = static_cast<std::uint8_t>(size);
    p[6] = df ? 0x40 : 0;
    p[8] = 64;
    p[9] = proto;
    const std::uint8_t src[4] = {10, 200, 0, 2}, dst[4] = {10, 201, 0, 2};
    std::memcpy(&p[12], src, 4);
    std::memcpy(&p[16], dst, 4);
    return p;
}
}  // namespace

TEST_CASE("HandoverQueue hands objects over in order and refuses when full") {
    HandoverQueue<int, 2> q;
    CHECK(q.take() == nullptr);
    CHECK(q.post(std::make_unique<int>(1)));
    CHECK(q.post(std::make_unique<int>(2)));
    CHECK_FALSE(q.post(std::make_unique<int>(3)));
    CHECK(*q.take() == 1);
    CHECK(q.post(std::make_unique<int>(4)));
    CHECK(*q.take() == 2);
    CHECK(*q.take() == 4);
    CHECK(q.take() == nullptr);
    q.post(std::make_unique<int>(5));  // freed by the destructor (ASan would see a leak)
}

TEST_CASE("too-big answer for IPv4 with DF: ICMP frag-needed with the MTU, valid checksums") {
    auto in = ipv4_packet(1500, true);
    std::vector<std::uint8_t> out(kTooBigMaxSize);
    const std::size_t n = build_too_big(in, 1380, out);
    REQUIRE(n == 576);
    CHECK(out[0] == 0x45);
    CHECK(((out[2] << 8) | out[3]) == 576);
    CHECK(out[9] == 1);
    CHECK(std::memcmp(&out[12], &in[16], 4) == 0);  // from the original destination
    CHECK(std::memcmp(&out[16], &in[12], 4) == 0);  // back to the sender
    CHECK(sum16(out.data(), 20) == 0xffff);
    CHECK(out[20] == 3);
    CHECK(out[21] == 4);
    CHECK(((out[26] << 8) | out[27]) == 1380);
    CHECK(sum16(&out[20], n - 20) == 0xffff);
    CHECK(std::memcmp(&out[28], in.data(), 20) == 0);  // quotes the original header
}

TEST_CASE("too-big: no answer without DF, to ICMP errors, or to garbage") {
    std::vector<std::uint8_t> out(kTooBigMaxSize);
    CHECK(build_too_big(ipv4_packet(1500, false), 1380, out) == 0);
    auto icmp_error = ipv4_packet(1500, true, 1);
    icmp_error[20] = 3;  // destination unreachable
    CHECK(build_too_big(icmp_error, 1380, out) == 0);
    auto echo = ipv4_packet(1500, true, 1);
    echo[20] = 8;  // echo request: answered
    CHECK(build_too_big(echo, 1380, out) > 0);
    const std::uint8_t junk[3] = {0x45, 0, 0};
    CHECK(build_too_big(junk, 1380, out) == 0);
    std::vector<std::uint8_t> small(100);
    CHECK(build_too_big(ipv4_packet(1500, true), 1380, small) == 0);
}

TEST_CASE("too-big answer for IPv6: packet too big, MTU at least 1280, checksum with pseudo-header") {
    std::vector<std::uint8_t> in(1500, 0x11);
    std::memset(in.data(), 0, 40);
    in[0] = 0x60;
    in[4] = (1500 - 40) >> 8;
    in[5] = (1500 - 40) & 0xff;
    in[6] = 17;
    in[7] = 64;
    in[8] = 0xfd;   // src fd00::2
    in[23] = 2;
    in[24] = 0xfd;  // dst fd00:201::2
    in[26] = 2;
    in[27] = 1;
    in[39] = 2;
    std::vector<std::uint8_t> out(kTooBigMaxSize);
    const std::size_t n = build_too_big(in, 1000, out);
    REQUIRE(n == 1280);
    CHECK(out[6] == 58);
    CHECK(std::memcmp(&out[8], &in[24], 16) == 0);
    CHECK(std::memcmp(&out[24], &in[8], 16) == 0);
    CHECK(out[40] == 2);
    const std::uint32_t mtu = (out[44] << 24) | (out[45] << 16) | (out[46] << 8) | out[47];
    CHECK(mtu == 1280);
    // Pseudo-header: addresses, length, next header.
    std::uint32_t acc = sum16(&out[8], 32);
    acc += static_cast<std::uint32_t>(n - 40) + 58;
    CHECK(sum16(&out[40], n - 40, acc) == 0xffff);
}

TEST_CASE("stats JSON names every counter; text shows the non-zero ones") {
    DatapathStats s;
    s.tx.drop_too_big = 3;
    s.rx.drop_replayed = 2;
    s.rx.spi = 0x1234;
    const std::string json = s.to_json();
    for (const char* name : {"\"tun_reads\": 0", "\"drop_too_big\": 3", "\"drop_replayed\": 2", "\"drop_bad_icv\": 0",
                             "\"spi\": \"0x00001234\"", "\"probe_replies\": 0", "\"needs_rekey\": false"})
        CHECK_MESSAGE(json.find(name) != std::string::npos, name);
    CHECK(s.drops() == 5);
    const std::string text = s.to_text();
    CHECK(text.find("drop_too_big=3") != std::string::npos);
    CHECK(text.find("drop_bad_icv") == std::string::npos);
}

TEST_CASE("live counters snapshot what their thread stored") {
    EspTxCounters c;
    bump(c.esp_packets, 5);
    bump(c.esp_packets);
    mirror(c.udp_sent, 9);
    EspTxStats s = c.snapshot();
    CHECK(s.esp_packets == 6);
    CHECK(s.udp_sent == 9);
}

TEST_CASE("ProbeTarget needs two numeric addresses of one family") {
    CHECK(ProbeTarget::parse("10.0.0.2", "10.0.0.1")->address_size == 4);
    CHECK(ProbeTarget::parse("fd00::2", "fd00::1")->address_size == 16);
    CHECK_FALSE(ProbeTarget::parse("10.0.0.2", "fd00::1").ok());
    CHECK(ProbeTarget::parse("gw.example", "10.0.0.1").error().message.find("numeric") != std::string::npos);
}

TEST_CASE("SA env file: keys build SAs, missing or bad fields are named") {
    const std::string good =
        "GENERATION=7\nENC=aes-128-cbc\nAUTH=sha1\nUDP_PORT=4501\nGW_ADDRESS=10.200.255.1\nCLIENT_IP=10.200.0.2\n"
        "C2S_SPI=0x00001001\nC2S_EKEY=000102030405060708090a0b0c0d0e0f\n"
        "C2S_AKEY=000102030405060708090a0b0c0d0e0f10111213\n"
        "S2C_SPI=0x00002002\nS2C_EKEY=0f0e0d0c0b0a09080706050403020100\n"
        "S2C_AKEY=13121110000102030405060708090a0b0c0d0e0f\n";
    auto sa = tools::SaFile::parse(good);
    REQUIRE(sa.ok());
    CHECK(sa->generation == 7);
    CHECK(sa->c2s.spi == 0x1001);
    CHECK(sa->s2c.spi == 0x2002);
    CHECK(sa->gw_address == "10.200.255.1");
    CHECK(sa->outbound(sa->c2s).ok());
    CHECK(sa->inbound(sa->s2c).ok());

    CHECK(tools::SaFile::parse("ENC=aes-128-cbc\n").error().message.find("GENERATION") != std::string::npos);
    std::string bad_spi = good;
    bad_spi.replace(bad_spi.find("0x00001001"), 10, "0xzz");
    CHECK(tools::SaFile::parse(bad_spi).error().message.find("C2S_SPI") != std::string::npos);
    CHECK(tools::SaFile::parse("garbage line\n").error().message.find("line 1") != std::string::npos);
    std::string short_key = good;
    short_key.replace(short_key.find("C2S_EKEY=00"), 11, "C2S_EKEY=");
    auto s2 = tools::SaFile::parse(short_key);
    REQUIRE(s2.ok());
    CHECK_FALSE(s2->outbound(s2->c2s).ok());
    CHECK(tools::SaFile::load("/nonexistent/sa.env").error().message.find("/nonexistent/sa.env") != std::string::npos);
}

TEST_CASE("PacketBatch::swap_packets moves packets between positions without copying bytes") {
    io::PacketBatch b({4, 100, 16, 0});
    for (std::uint8_t v = 1; v <= 3; ++v) {
        auto room = b.next_room();
        room[0] = v;
        b.commit(1 + v);
    }
    const std::uint8_t* third = b.packet(2).data();
    b.swap_packets(0, 2);
    CHECK(b.packet(0).data() == third);
    CHECK(b.packet(0)[0] == 3);
    CHECK(b.length(0) == 4);
    CHECK(b.packet(2)[0] == 1);
    b.set_size(1);
    b.clear();
    auto room = b.next_room();  // slots stay distinct after swaps
    CHECK(room.data() != b.slot(1).data() + 16);
    CHECK(b.front_room(0) == 16);
}

TEST_CASE("DtlsDatapathStats::add sums every counter (AnyConnect totals over DTLS sessions)") {
    DtlsDatapathStats a, b;
    a.tx.inner_bytes = 100;
    a.tx.drop_too_big = 1;
    a.rx.inner_packets = 7;
    b.tx.inner_bytes = 20;
    b.rx.drop_discarded = 2;
    b.rx.inner_packets = 3;
    a.add(b);
    CHECK(a.tx.inner_bytes == 120);
    CHECK(a.rx.inner_packets == 10);
    CHECK(a.drops() == 3);
    CHECK(b.tx.inner_bytes == 20);  // the other side is unchanged
}

TEST_CASE("StatsReporter with a StatsView writes the view's JSON, last at destruction") {
    const std::string path = "/tmp/espvpn-stats-view-" + std::to_string(::getpid()) + ".json";
    std::atomic<int> calls{0};
    StatsView view{[&] { return "{\"n\": " + std::to_string(++calls) + "}"; }, [] { return std::string("text"); }};
    io::LocalStateFiles files;
    StatsReporterOptions o;
    o.json_path = path;
    o.files = &files;
    o.json_interval = std::chrono::milliseconds(3600 * 1000);  // only the explicit and the final write
    o.print_on_sigusr1 = false;
    {
        auto r = StatsReporter::start(view, o);
        REQUIRE(r);
        REQUIRE((*r)->write_json());
        std::ifstream first(path);
        std::string text((std::istreambuf_iterator<char>(first)), std::istreambuf_iterator<char>());
        CHECK(text == "{\"n\": 1}\n");
    }
    std::ifstream last(path);
    std::string text((std::istreambuf_iterator<char>(last)), std::istreambuf_iterator<char>());
    CHECK(text == "{\"n\": 2}\n");
    std::remove(path.c_str());
}

// Issue 41: --stats-json in a directory someone else can write; they plant a symlink at
// the temporary name before espvpn writes.
TEST_CASE("StatsReporter: a symlink planted at the temporary name is refused, never written through") {
    char dir[] = "/tmp/espvpn-stats-plant-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string path = std::string(dir) + "/stats.json";
    const std::string target = std::string(dir) + "/victim";
    REQUIRE(::symlink(target.c_str(), (path + ".espvpn-new").c_str()) == 0);
    StatsView view{[] { return std::string("{\"n\": 1}"); }, [] { return std::string("text"); }};
    io::LocalStateFiles files;
    StatsReporterOptions o;
    o.json_path = path;
    o.files = &files;
    o.json_interval = std::chrono::milliseconds(3600 * 1000);
    o.print_on_sigusr1 = false;
    {
        auto r = StatsReporter::start(view, o);
        REQUIRE(r);
        auto st = (*r)->write_json();
        REQUIRE_FALSE(st);
        CHECK(st.error().message.find("symlink is already there") != std::string::npos);
        CHECK(st.error().message.find(path + ".espvpn-new") != std::string::npos);
    }
    CHECK(::access(target.c_str(), F_OK) != 0);  // nothing created through the link
    CHECK(::access(path.c_str(), F_OK) != 0);
    ::unlink((path + ".espvpn-new").c_str());
    ::rmdir(dir);
}

TEST_CASE("a UDP pipeline's batch sizes are 1..UdpSocket::kMaxBatch each") {
    using espvpn::datapath::check_batch_sizes;
    constexpr std::size_t max = espvpn::io::UdpSocket::kMaxBatch;
    CHECK(check_batch_sizes("datapath", 1, max));
    CHECK_FALSE(check_batch_sizes("datapath", 0, 1));
    CHECK_FALSE(check_batch_sizes("datapath", 1, max + 1));
    auto st = check_batch_sizes("DTLS datapath", max + 1, 1);
    REQUIRE_FALSE(st);
    CHECK(st.error().message == "DTLS datapath: batch sizes must be 1.." + std::to_string(max));
}

// The privilege split's session cannot write a stats file in a root-only directory: the JSON
// must travel through StateFiles (the broker's write_state), not a file opened here.
TEST_CASE("StatsReporter writes --stats-json through StateFiles (no fsync, mode 0644), and needs one") {
    using Op = test::RecordingStateFiles::Call::Op;
    const std::string path = "/tmp/espvpn-stats-fake-" + std::to_string(::getpid()) + ".json";
    StatsView view{[] { return std::string("{\"n\": 1}"); }, [] { return std::string("text"); }};
    test::RecordingStateFiles files;
    StatsReporterOptions o;
    o.json_path = path;
    o.json_interval = std::chrono::milliseconds(3600 * 1000);
    o.print_on_sigusr1 = false;
    auto none = StatsReporter::start(view, o);
    REQUIRE_FALSE(none);
    CHECK(none.error().message.find("StateFiles") != std::string::npos);
    o.files = &files;
    {
        auto r = StatsReporter::start(view, o);
        REQUIRE(r);
        REQUIRE((*r)->write_json());
    }
    auto writes = files.of(Op::write);
    REQUIRE(writes.size() == 2);  // the explicit one and the last, at destruction
    for (const auto& w : writes) {
        CHECK(w.path == path);
        CHECK(w.bytes == "{\"n\": 1}\n");
        CHECK(w.sync == io::Sync::no);
        CHECK(w.new_mode == 0644);
    }
    CHECK(::access(path.c_str(), F_OK) != 0);
    // A refused write is the writer's error, named as the stats'.
    files.fail_writes = "refused";
    auto r = StatsReporter::start(view, o);
    REQUIRE(r);
    auto st = (*r)->write_json();
    REQUIRE_FALSE(st);
    CHECK(st.error().message == "stats: refused");
}

TEST_CASE("RxLinger waits only while a download arrives a few data-sized datagrams per wake-up") {
    using namespace std::chrono;
    const auto t0 = RxLinger::Clock::time_point() + hours(1);
    const microseconds w(50);
    RxLinger l(w, 64);
    CHECK(l.wait_after_wakeup(t0) == microseconds(0));  // nothing seen yet

    // A download: 3 datagrams of 1400 bytes delivered just now.
    l.received(3, 3 * 1400);
    l.received(40, 40 * 1400);  // later receives of the same wake-up do not count
    l.delivered(t0);
    CHECK(l.wait_after_wakeup(t0 + microseconds(200)) == w);
    // Each wake-up is judged on its own first receive: none seen since.
    CHECK(l.wait_after_wakeup(t0 + microseconds(300)) == microseconds(0));

    SUBCASE("a full-enough batch: no wait") {
        l.received(16, 16 * 1400);
        l.delivered(t0);
        CHECK(l.wait_after_wakeup(t0 + microseconds(10)) == microseconds(0));
        l.received(15, 15 * 1400);
        l.delivered(t0);
        CHECK(l.wait_after_wakeup(t0 + microseconds(10)) == w);
    }
    SUBCASE("ACKs (an upload's return path): no wait") {
        l.received(4, 4 * 80);
        l.delivered(t0);
        CHECK(l.wait_after_wakeup(t0 + microseconds(10)) == microseconds(0));
        l.received(2, 1000 + 999);  // one short of data-sized on average
        l.delivered(t0);
        CHECK(l.wait_after_wakeup(t0 + microseconds(10)) == microseconds(0));
    }
    SUBCASE("after a pause (a ping, a lone packet): no wait") {
        l.received(1, 1400);
        l.delivered(t0);
        CHECK(l.wait_after_wakeup(t0 + RxLinger::kStreamGap) == microseconds(0));
        l.received(1, 1400);
        l.delivered(t0);
        CHECK(l.wait_after_wakeup(t0 + RxLinger::kStreamGap - microseconds(1)) == w);
    }
    SUBCASE("zero turns it off") {
        RxLinger off(microseconds(0), 64);
        off.received(1, 1400);
        off.delivered(t0);
        CHECK(off.wait_after_wakeup(t0) == microseconds(0));
    }
}

TEST_CASE("RxLinger: the wait follows the arrival rate, between the floor and 8 floors") {
    using namespace std::chrono;
    auto t = RxLinger::Clock::time_point() + hours(1);
    const microseconds floor(50);
    RxLinger l(floor, 64);
    // One wake-up: its first receive finds `first`, then it asks how long to wait.
    auto wake = [&](std::size_t first) {
        t += microseconds(100);
        l.received(first, first * 1400);
        l.delivered(t);
        return l.wait_after_wakeup(t + microseconds(10));
    };
    CHECK(wake(1) == floor);
    // A slow paced download: each wait gathers 2 datagrams, so each next wait doubles, up to 400 us.
    CHECK(wake(2) == microseconds(100));
    CHECK(wake(2) == microseconds(200));
    CHECK(wake(2) == microseconds(400));
    CHECK(wake(2) == microseconds(400));
    // Gathering kGather..2*kGather-1 keeps it.
    CHECK(wake(RxLinger::kGather) == microseconds(400));
    CHECK(wake(2 * RxLinger::kGather - 1) == microseconds(400));
    // Gathering 2*kGather or more halves it (and that wake-up, a quarter batch, does not wait).
    CHECK(wake(2 * RxLinger::kGather) == microseconds(0));
    CHECK(l.current_wait() == microseconds(200));
    // A receive after a wake-up that did not wait says nothing about the wait's length.
    CHECK(wake(40) == microseconds(0));
    CHECK(l.current_wait() == microseconds(200));
    CHECK(wake(3) == microseconds(200));
    CHECK(wake(12) == microseconds(200));
    CHECK(wake(12) == microseconds(200));

    SUBCASE("it never goes below the floor") {
        RxLinger fast(floor, 64);
        for (int i = 0; i < 3; ++i) {
            fast.received(3, 3 * 1400);
            fast.delivered(t);
            CHECK(fast.wait_after_wakeup(t) == floor);
            fast.received(20, 20 * 1400);  // the wait gathered many: halving would go below the floor
            fast.delivered(t);
            CHECK(fast.wait_after_wakeup(t) == microseconds(0));
            CHECK(fast.current_wait() == floor);
        }
    }
    SUBCASE("a floor above 125 us tops out at 1000 us") {
        RxLinger big(microseconds(300), 64);
        for (int i = 0; i < 5; ++i) {
            big.received(1, 1400);
            big.delivered(t);
            (void)big.wait_after_wakeup(t);
        }
        CHECK(big.current_wait() == microseconds(1000));
    }
}

TEST_CASE("client_rx_linger: 50 us, ESPVPN_RX_LINGER_US within 0-1000, garbage ignored") {
    using std::chrono::microseconds;
    const char* saved = std::getenv("ESPVPN_RX_LINGER_US");
    const std::string keep = saved ? saved : "";
    ::unsetenv("ESPVPN_RX_LINGER_US");
    CHECK(client_rx_linger() == microseconds(50));
    ::setenv("ESPVPN_RX_LINGER_US", "0", 1);
    CHECK(client_rx_linger() == microseconds(0));
    ::setenv("ESPVPN_RX_LINGER_US", "120", 1);
    CHECK(client_rx_linger() == microseconds(120));
    ::setenv("ESPVPN_RX_LINGER_US", "999999", 1);
    CHECK(client_rx_linger() == microseconds(1000));
    ::setenv("ESPVPN_RX_LINGER_US", "12x", 1);
    CHECK(client_rx_linger() == microseconds(50));
    ::setenv("ESPVPN_RX_LINGER_US", "-5", 1);
    CHECK(client_rx_linger() == microseconds(50));
    if (saved) ::setenv("ESPVPN_RX_LINGER_US", keep.c_str(), 1);
    else ::unsetenv("ESPVPN_RX_LINGER_US");
}
