// libFuzzer target: DtlsRecordOpener::open (crypto/dtls_record.h) with fixed
// states of each AEAD. Control byte: bits 0..1 pick the AEAD, bit 7 the mode.
//   mode 0: the rest is the datagram, opened into an output exactly as large as
//           the next control byte says (so ASan sees any write past it);
//   mode 1: the rest is a plaintext sealed by the matching sealer, so the
//           fuzzer reaches the code after the tag check; it must open to the
//           same bytes, once (a second open is a replay).
#include <vector>

#include "crypto/dtls_record.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

namespace {

struct Pair {
    DtlsRecordSealer sealer;
    DtlsRecordOpener opener;
};

DtlsRecordState state_of(DtlsAead aead) {
    DtlsRecordState s;
    s.aead = aead;
    s.key.fill(0x11);
    s.iv.fill(0x22);
    s.epoch = 1;
    s.seq = 5;
    return s;
}

std::vector<Pair> make_all() {
    std::vector<Pair> all;
    for (DtlsAead a : {DtlsAead::aes128_gcm, DtlsAead::aes256_gcm, DtlsAead::chacha20_poly1305}) {
        const DtlsRecordState s = state_of(a);
        all.push_back({DtlsRecordSealer::create(s).value(), DtlsRecordOpener::create(s).value()});
    }
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static std::vector<Pair> pairs = make_all();
    fuzz::InputReader in(data, size);
    const std::uint8_t control = in.byte();
    Pair& p = pairs[(control & 0x03) % pairs.size()];
    if (!(control & 0x80)) {
        std::vector<std::uint8_t> out(in.byte() * 8u);
        const std::vector<std::uint8_t> datagram(in.rest().begin(), in.rest().end());
        const DtlsRecordOpened r = p.opener.open(datagram, out);
        if (r.status == DtlsOpenStatus::ok && r.length > out.size()) __builtin_trap();
        return 0;
    }
    const std::vector<std::uint8_t> plain(in.rest().begin(), in.rest().end());
    std::vector<std::uint8_t> record(plain.size() + p.sealer.overhead());
    const std::size_t n = p.sealer.seal(plain, record);
    if (n == 0) {
        if (plain.size() <= 16384) __builtin_trap();
        return 0;
    }
    std::vector<std::uint8_t> out(plain.size());
    const DtlsRecordOpened r = p.opener.open({record.data(), n}, out);
    if (r.status != DtlsOpenStatus::ok || r.length != plain.size() || out != plain) __builtin_trap();
    if (p.opener.open({record.data(), n}, out).status != DtlsOpenStatus::replayed) __builtin_trap();
    return 0;
}
