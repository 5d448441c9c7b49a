// libFuzzer target: ESP inbound processing with fixed SAs of every suite
// (GCM and CBC + HMAC). Control byte: bits 0..6 pick the suite, bit 7 the mode.
//   mode 0: the rest is the UDP payload, opened by the SA and again through
//           EspInboundSas (SPI lookup over current + previous SA);
//   mode 1: the rest (after a next-header byte) is an inner packet sealed by the
//           matching outbound SA, so the fuzzer reaches the code after the ICV
//           check; it must open to the same bytes (or drop on next header).
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
                       EspOutboundSa::create(kSpi, keys).value()});
    }
    return all;
}

void check_inside(const EspReceived& r, const std::vector<std::uint8_t>& buf) {
    if (r.ok() && (r.inner.data() < buf.data() || r.inner.data() + r.inner.size() > buf.data() + buf.size()))
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static std::vector<SuiteSas> sas = make_all();
    static std::vector<std::uint8_t> buf;
    fuzz::InputReader in(data, size);
    const std::uint8_t control = in.byte();
    SuiteSas& sa = sas[(control & 0x7f) % sas.size()];

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
