// libFuzzer target: ESP inbound processing with fixed SAs of every suite
// (GCM and CBC + HMAC). Control byte: bits 0..5 pick the suite, bits 6..7 the mode.
//   mode 0: the rest is the UDP payload, opened by the SA and again through
//           EspInboundSas (SPI lookup over current + previous SA);
//   mode 2 (bit 7): the rest (after a next-header byte) is an inner packet sealed by
//           the matching outbound SA, so the fuzzer reaches the code after the ICV
//           check; it must open to the same bytes (or drop on next header);
//   mode 1 (bit 6): up to 96 datagrams in batches, each raw bytes, a sealed inner
//           packet (from one of three senders: two SPIs, one sender past the replay
//           window) or a copy of an earlier one (a replay, maybe altered), opened by
//           open_batch on fresh SAs and one at a time by open() on twin SAs: the
//           verdicts, sequence numbers and inner packets must be the same.
#include <algorithm>
#include <vector>

#include "crypto/suites.h"
#include "protocols/esp/esp_sa.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

namespace {

constexpr std::uint32_t kSpi = 0x0badcafe;

EspSaKeys make_keys(const EspSuiteName& name) {
    EspSuite suite = esp_suite_from_names(name.enc, name.auth).value();
    std::string enc(suite.enc_key_size(), 0x11);
    std::string auth(suite.auth_key_size(), 0x22);
    return EspSaKeys::create(suite, Secret::from_string(enc), Secret::from_string(auth)).value();
}

struct SuiteSas {
    EspInboundSa single;
    EspInboundSas pair;
    EspOutboundSa out;
    EspSaKeys keys;  // mode 1 makes fresh SAs from these for each input
};

std::vector<SuiteSas> make_all() {
    std::vector<SuiteSas> all;
    for (const EspSuiteName& name : known_esp_suites()) {
        if (!suite_available(name)) continue;
        EspSaKeys keys = make_keys(name);
        EspInboundSas pair;
        pair.install(EspInboundSa::create(kSpi - 1, keys).value());
        pair.install(EspInboundSa::create(kSpi, keys).value());
        all.push_back({EspInboundSa::create(kSpi, keys).value(), std::move(pair),
                       EspOutboundSa::create(kSpi, keys).value(), keys.clone()});
    }
    return all;
}

void check_inside(const EspReceived& r, const std::vector<std::uint8_t>& buf) {
    if (r.ok() && (r.inner.data() < buf.data() || r.inner.data() + r.inner.size() > buf.data() + buf.size()))
        __builtin_trap();
}

// Mode 1: open_batch against open() one at a time. Fresh SAs for each input: two
// inbound pairs (previous + current SPI) that see the same datagrams in the same order,
// and two senders, one 3000 numbers ahead (past the replay window).
void batch_against_one_at_a_time(const SuiteSas& sa, fuzz::InputReader& in) {
    constexpr std::size_t kMaxDatagrams = 96;
    EspInboundSas twin_batch, twin_alone;
    for (EspInboundSas* p : {&twin_batch, &twin_alone}) {
        p->install(EspInboundSa::create(kSpi - 1, sa.keys).value());
        p->install(EspInboundSa::create(kSpi, sa.keys).value());
    }
    EspOutboundSa low = EspOutboundSa::create(kSpi, sa.keys).value();
    EspOutboundSa high = EspOutboundSa::create(kSpi, sa.keys, 3000).value();
    EspOutboundSa previous = EspOutboundSa::create(kSpi - 1, sa.keys).value();
    std::vector<std::vector<std::uint8_t>> seen, batch;  // every datagram of this input; the batch to open
    auto open_both = [&] {
        std::vector<std::vector<std::uint8_t>> bufs = batch;
        std::vector<EspOpenItem> items;
        for (auto& b : bufs) items.push_back({b, {}});
        twin_batch.open_batch(items);
        for (std::size_t i = 0; i < batch.size(); ++i) {
            const EspReceived want = twin_alone.open(batch[i]);
            const EspReceived& got = items[i].result;
            check_inside(got, bufs[i]);
            if (got.drop != want.drop || got.spi != want.spi || got.seq != want.seq ||
                got.next_header != want.next_header ||
                !std::equal(got.inner.begin(), got.inner.end(), want.inner.begin(), want.inner.end()))
                __builtin_trap();
        }
        batch.clear();
    };
    while (seen.size() < kMaxDatagrams && !in.rest().empty()) {
        const std::uint8_t op = in.byte();
        const std::size_t len = in.byte();
        std::vector<std::uint8_t> d;
        switch (op % 4) {
            case 0: {  // raw bytes
                auto raw = in.take(len);
                d.assign(raw.begin(), raw.end());
                break;
            }
            case 1: {  // an authentic packet of len inner bytes, from one of the senders
                EspOutboundSa& out = op & 0x10 ? high : op & 0x20 ? previous : low;
                std::vector<std::uint8_t> buf(kEspMaxHeadroom + len + kEspMaxTailroom, op);
                EspSealResult sealed = out.seal(buf, kEspMaxHeadroom, len, op & 8 ? kEspNextHeaderIpv6 : kEspNextHeaderIpv4);
                if (sealed.ok()) d.assign(sealed.packet.begin(), sealed.packet.end());
                break;
            }
            case 2:  // a copy of an earlier datagram (this batch or an earlier one), maybe with a bit flipped
                if (seen.empty()) continue;
                d = seen[len % seen.size()];
                if (op & 0x80 && !d.empty()) d[op % d.size()] ^= 1;
                break;
            default:  // the batch so far is opened; the next datagrams make a new one
                open_both();
                continue;
        }
        seen.push_back(d);
        batch.push_back(std::move(d));
    }
    open_both();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static std::vector<SuiteSas> sas = make_all();
    static std::vector<std::uint8_t> buf;
    fuzz::InputReader in(data, size);
    const std::uint8_t control = in.byte();
    SuiteSas& sa = sas[(control & 0x3f) % sas.size()];

    if (control & 0x40) {
        batch_against_one_at_a_time(sa, in);
        return 0;
    }
    if (control & 0x80) {
        const std::uint8_t next_header = in.byte();
        auto inner = in.rest();
        buf.assign(kEspMaxHeadroom + inner.size() + kEspMaxTailroom, 0);
        std::copy(inner.begin(), inner.end(), buf.begin() + kEspMaxHeadroom);
        EspSealResult sealed = sa.out.seal(buf, kEspMaxHeadroom, inner.size(), next_header);
        if (!sealed.ok()) return 0;
        std::vector<std::uint8_t> packet(sealed.packet.begin(), sealed.packet.end());
        EspReceived r = sa.single.open(packet);
        check_inside(r, packet);
        const bool ip_next_header = next_header == kEspNextHeaderIpv4 || next_header == kEspNextHeaderIpv6;
        if (r.ok() != ip_next_header) __builtin_trap();
        if (r.ok() && !std::equal(r.inner.begin(), r.inner.end(), inner.begin(), inner.end())) __builtin_trap();
        return 0;
    }
    auto packet = in.rest();
    buf.assign(packet.begin(), packet.end());
    EspReceived r = sa.single.open(buf);
    check_inside(r, buf);
    (void)describe(r.drop);
    buf.assign(packet.begin(), packet.end());
    check_inside(sa.pair.open(buf), buf);
    return 0;
}
