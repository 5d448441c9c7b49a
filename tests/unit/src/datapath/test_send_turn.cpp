// SendTurn (src/datapath/send_turn.h): the ESP pipelines' tx and rx threads take turns at
// the send side; the rx thread mutes the tun in the tx thread's epoll set while it holds it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "protocols/esp/esp_sa.h"
#include "src/datapath/send_turn.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::datapath;

namespace {

struct Pipe {
    int fds[2] = {-1, -1};
    Pipe() { REQUIRE(::pipe(fds) == 0); }
    ~Pipe() {
        ::close(fds[0]);
        ::close(fds[1]);
    }
    int read_end() const { return fds[0]; }
    void put() const { REQUIRE(::write(fds[1], "x", 1) == 1); }
};

std::uint32_t be32_at(std::span<const std::uint8_t> p, std::size_t at) {
    return std::uint32_t{p[at]} << 24 | std::uint32_t{p[at + 1]} << 16 | std::uint32_t{p[at + 2]} << 8 | p[at + 3];
}

}  // namespace

TEST_CASE("SendTurn: the rx thread takes only an idle turn; while it holds it the tun does not wake the tx thread") {
    Pipe tun;  // stands in for the tun: readable when it has a byte
    ControlChannel control;
    PipelineFailure failure;
    SendTurn turn(tun.read_end(), control);

    // The tx thread holds it from the start (its first SA before any seal).
    CHECK_FALSE(turn.take_rx());
    CHECK(turn.take_tx());
    turn.give_tx();

    tun.put();
    CHECK(turn.wait_tx(0, failure).tun);  // watched: a readable tun would wake the tx thread

    REQUIRE(turn.take_rx());
    CHECK(turn.rx_holds());
    CHECK(turn.take_rx());  // already held
    SendTurn::Woken w = turn.wait_tx(0, failure);
    CHECK_FALSE(w.failed);
    CHECK_FALSE(w.tun);  // muted: the kernel's answers to the rx thread's tun write wake nobody
    CHECK_FALSE(w.control);

    CHECK_FALSE(turn.take_tx());  // the rx thread has it: the tx thread asks
    CHECK(turn.tx_asked());
    turn.give_rx();
    CHECK_FALSE(turn.rx_holds());
    w = turn.wait_tx(0, failure);
    CHECK(w.control);  // told that the turn is free
    CHECK(w.tun);      // and the tun is watched again, its packet still there
    CHECK(turn.take_tx());
    CHECK_FALSE(turn.take_rx());  // never while the tx thread holds it
    turn.give_tx();
    CHECK(failure.get() == std::nullopt);
}

TEST_CASE("SendTurn: two threads sealing with one outbound SA by turns never repeat a sequence number or GCM IV") {
    const EspSuite suite{EspCipher::aes128_gcm, EspIntegrity::none};
    auto sa = EspOutboundSa::create(0x01020304, test::test_keys(suite, 5));
    REQUIRE(sa.ok());
    Pipe tun;
    ControlChannel control;
    PipelineFailure failure;
    SendTurn turn(tun.read_end(), control);

    constexpr int kTotal = 20000;
    std::atomic<int> sealed{0}, sealed_by_tx{0}, sealed_by_rx{0};
    // At least kTotal, and until each thread has sealed some (however the scheduler runs them).
    auto done = [&] { return sealed.load() >= kTotal && sealed_by_tx.load() > 0 && sealed_by_rx.load() > 0; };
    std::atomic<int> holders{0};
    std::atomic<bool> overlap{false};
    struct Seen {
        std::vector<std::uint32_t> seq;
        std::vector<std::uint64_t> iv;
    };
    Seen by_tx, by_rx;
    const test::Bytes payload(60, 0x45);
    // Seals up to n packets as the holder of the turn, recording each packet's sequence
    // number and explicit IV.
    auto seal_some = [&](Seen& seen, std::atomic<int>& mine, int n) {
        if (holders.fetch_add(1) != 0) overlap = true;
        std::vector<std::uint8_t> buf(kEspMaxHeadroom + payload.size() + kEspMaxTailroom);
        for (int k = 0; k < n && !done(); ++k) {
            std::copy(payload.begin(), payload.end(), buf.begin() + kEspMaxHeadroom);
            EspSealResult r = sa->seal(buf, kEspMaxHeadroom, payload.size(), kEspNextHeaderIpv4);
            if (!r.ok()) continue;
            seen.seq.push_back(be32_at(r.packet, 4));
            seen.iv.push_back(std::uint64_t{be32_at(r.packet, 8)} << 32 | be32_at(r.packet, 12));
            sealed.fetch_add(1);
            mine.fetch_add(1);
        }
        holders.fetch_sub(1);
    };

    std::thread tx([&] {
        while (!done()) {
            if (turn.take_tx()) {
                seal_some(by_tx, sealed_by_tx, 7);
                turn.give_tx();
            } else if (turn.wait_tx(-1, failure).failed) {  // the rx thread notifies when it gives it back
                return;
            }
        }
    });
    std::thread rx([&] {
        int rounds = 0;
        while (!done()) {
            if (turn.take_rx()) {
                seal_some(by_rx, sealed_by_rx, 5);
                if (++rounds % 3 == 0 || turn.tx_asked()) turn.give_rx();
            } else {
                std::this_thread::yield();
            }
        }
        turn.give_rx();
    });
    rx.join();
    tx.join();

    CHECK_FALSE(overlap.load());
    CHECK(failure.get() == std::nullopt);
    CHECK(by_tx.seq.size() > 0);
    CHECK(by_rx.seq.size() > 0);
    std::vector<std::uint32_t> all = by_tx.seq;
    all.insert(all.end(), by_rx.seq.begin(), by_rx.seq.end());
    std::sort(all.begin(), all.end());
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
    CHECK(all.size() == static_cast<std::size_t>(sealed.load()));
    CHECK(all.front() == 1);
    CHECK(all.back() == all.size());  // 1..n, none skipped, none twice
    std::set<std::uint64_t> ivs(by_tx.iv.begin(), by_tx.iv.end());
    ivs.insert(by_rx.iv.begin(), by_rx.iv.end());
    CHECK(ivs.size() == all.size());
}
