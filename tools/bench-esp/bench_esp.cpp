// bench-esp: ESP seal/open throughput per suite next to the raw ceiling of the same
// primitives, the kernel's copy in + copy out of the same bytes, and a GnuTLS-vs-Nettle comparison per primitive (the evidence behind the
// library choices in crypto/esp_transform.cpp); the AES-GCM paths of crypto/aes_gcm.h forced in
// turn (GnuTLS, VAES-AVX2, VAES-AVX-512). See docs/PERFORMANCE.md.
//
//   bench-esp [--quick] [--seconds S] [--no-primitives] [--gcm-paths]
//   --no-primitives: only the ESP table and the kernel copies (tools/bench's floor)
//   --gcm-paths: only the AES-GCM path comparison
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "crypto/aes_cbc_lanes.h"
#include "crypto/aes_gcm.h"
#include "crypto/cpu_features.h"
#include <nettle/aes.h>
#include <nettle/cbc.h>
#include "protocols/esp/esp_sa.h"
#include "tools/bench-esp/primitives.h"
#include "tools/bench-esp/timing.h"

using namespace espvpn;
using namespace espvpn::bench;

namespace {

constexpr std::size_t kSizes[] = {64, 512, 1400, 8000};
constexpr std::size_t kSealBatch = 32;

struct Options {
    double seconds = 0.2;
    int rounds = 3;
    bool primitives = true;
    bool gcm_paths_only = false;
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

EspSaKeys bench_keys(const EspSuite& suite) {
    Secret e(suite.enc_key_size()), a(suite.auth_key_size());
    for (std::size_t i = 0; i < e.size(); ++i) e.reveal_mutable()[i] = static_cast<std::uint8_t>(i * 5 + 1);
    for (std::size_t i = 0; i < a.size(); ++i) a.reveal_mutable()[i] = static_cast<std::uint8_t>(i * 3 + 2);
    auto k = EspSaKeys::create(suite, std::move(e), std::move(a));
    if (!k) {
        std::fprintf(stderr, "bench-esp: %s\n", k.error().message.c_str());
        std::exit(1);
    }
    return std::move(*k);
}

void die_if(bool bad, const char* what) {
    if (bad) {
        std::fprintf(stderr, "bench-esp: %s\n", what);
        std::exit(1);
    }
}

void run_primitives(const Options& o) {
    std::printf("\n## GnuTLS vs Nettle, per primitive (in place, Gbit/s and cycles/byte)\n\n");
    std::printf("| primitive | bytes | GnuTLS | Nettle |\n|---|---:|---:|---:|\n");
    auto cases = primitive_cases();
    std::vector<std::uint8_t> buf(9000, 0x5a);
    for (std::size_t i = 0; i + 1 < cases.size(); i += 2) {
        const auto& g = cases[i];
        const auto& n = cases[i + 1];
        const bool per_packet = g.name.find("IV") != std::string::npos;
        for (std::size_t size : kSizes) {
            if (per_packet && size != 64) continue;
            auto tg = measure(size, o.seconds, [&](std::uint64_t) { g.run(buf.data(), size); }, o.rounds);
            auto tn = measure(size, o.seconds, [&](std::uint64_t) { n.run(buf.data(), size); }, o.rounds);
            if (per_packet) {  // cost per call, whatever the packet size
                std::printf("| %s: %s vs %s | - | %.0f ns | %.0f ns |\n", g.name.c_str(), g.library.c_str(),
                            n.library.c_str(), size * 8 / tg.gbit_per_s, size * 8 / tn.gbit_per_s);
            } else {
                std::printf("| %s | %zu | %.2f (%.2f c/B) | %.2f (%.2f c/B) |\n", g.name.c_str(), size, tg.gbit_per_s,
                            tg.cycles_per_byte, tn.gbit_per_s, tn.cycles_per_byte);
            }
        }
    }
}

// ESP seal and open of one suite at one size, as the datapath does them.
struct SealOpen {
    Throughput seal;
    double open_cpb = 0, open_gbps = 0;
};
SealOpen seal_and_open(const Options& o, const EspSaKeys& keys, std::size_t size) {
    // As the datapath seals: a batch of packets per call (seal_batch).
    std::vector<std::vector<std::uint8_t>> bufs(kSealBatch,
                                                std::vector<std::uint8_t>(kEspMaxHeadroom + size + kEspMaxTailroom, 0x22));
    std::vector<EspOutboundSa::Item> items(kSealBatch);
    auto seal_all = [&](EspOutboundSa& sa) {
        for (std::size_t i = 0; i < kSealBatch; ++i)
            items[i] = EspOutboundSa::Item{bufs[i], kEspMaxHeadroom, size, kEspNextHeaderIpv4, {}};
        sa.seal_batch(items);
        for (const auto& it : items) die_if(!it.result.ok(), "seal failed");
    };
    auto tx = EspOutboundSa::create(0x1000, keys);
    die_if(!tx.ok(), "cannot create the outbound SA");
    SealOpen r;
    r.seal = measure(size * kSealBatch, o.seconds, [&](std::uint64_t) { seal_all(*tx); }, o.rounds);

    auto rt_tx = EspOutboundSa::create(0x2000, keys);
    EspInboundSas rx;
    rx.install(EspInboundSa::create(0x2000, keys).value());
    std::vector<EspOpenItem> opened(kSealBatch);
    auto round_trip = measure(size * kSealBatch, o.seconds,
                              [&](std::uint64_t) {
                                  seal_all(*rt_tx);
                                  // As the datapath opens: the batch in one call (open_batch).
                                  for (std::size_t i = 0; i < kSealBatch; ++i) opened[i] = {items[i].result.packet, {}};
                                  rx.open_batch(opened);
                                  for (const auto& it : opened) die_if(!it.result.ok(), "open failed");
                              },
                              o.rounds);
    r.open_cpb = round_trip.cycles_per_byte - r.seal.cycles_per_byte;
    r.open_gbps = r.open_cpb > 0 ? 8 * tsc_hz() / r.open_cpb / 1e9 : 0;
    return r;
}

void run_esp(const Options& o) {
    std::printf("\n## ESP seal/open per suite (payload bytes; in place; Gbit/s and cycles/byte)\n\n");
    std::printf("seal: batches of %zu packets (EspOutboundSa::seal_batch, as the datapath seals; CBC encrypts them "
                "side by side). open = (seal+open round trip) - seal, so the replay window sees fresh numbers; open takes the "
                "batch in one call too (EspInboundSas::open_batch).\n",
                kSealBatch);
    std::printf("ceiling = the same primitives called raw on the payload (AES-128-GCM encrypt; "
                "AES-128-CBC encrypt + HMAC-SHA1), one packet at a time.\n\n");
    std::printf("| suite | bytes | seal Gbit/s | seal c/B | open Gbit/s | open c/B | ceiling Gbit/s | seal/ceiling |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<std::uint8_t> raw(9000, 0x11);
    std::vector<EspSuite> suites;
    for (auto c : {EspCipher::aes128_gcm, EspCipher::aes256_gcm}) suites.push_back({c, EspIntegrity::none});
    for (auto c : {EspCipher::aes128_cbc, EspCipher::aes256_cbc})
        for (auto i : {EspIntegrity::hmac_sha1_96, EspIntegrity::hmac_sha256_128, EspIntegrity::hmac_md5_96})
            suites.push_back({c, i});

    for (const EspSuite& suite : suites) {
        auto keys = bench_keys(suite);
        const bool has_ceiling = suite.cipher == EspCipher::aes128_gcm ||
                                 (suite.cipher == EspCipher::aes128_cbc && suite.integrity == EspIntegrity::hmac_sha1_96);
        for (std::size_t size : kSizes) {
            const SealOpen r = seal_and_open(o, keys, size);
            std::printf("| %s | %zu | %.2f | %.2f | %.2f | %.2f |", std::string(suite.name()).c_str(), size,
                        r.seal.gbit_per_s, r.seal.cycles_per_byte, r.open_gbps, r.open_cpb);
            if (has_ceiling) {
                auto raw_op = suite.is_aead() ? raw_gcm128_encrypt : raw_cbc128_sha1;
                auto ceil = measure(size, o.seconds, [&](std::uint64_t) { raw_op(raw.data(), size); }, o.rounds);
                std::printf(" %.2f | %.0f%% |\n", ceil.gbit_per_s, 100 * r.seal.gbit_per_s / ceil.gbit_per_s);
            } else {
                std::printf(" - | - |\n");
            }
        }
    }
}

// The AES-GCM paths forced in turn with ESPVPN_GCM_VAES, as a user would force them (the SAs
// read it when they are created): the same ESP seal and open as above, per path.
void run_gcm_paths(const Options& o) {
    std::printf("\n## ESP AES-GCM per path (ESPVPN_GCM_VAES forced in turn; as above: batches of %zu, in place)\n\n",
                kSealBatch);
    std::printf("| path | suite | bytes | seal Gbit/s | seal c/B | open Gbit/s | open c/B | seal, open c/B vs GnuTLS |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
    struct Forced {
        AesGcm::Path path;
        const char* value;
    };
    const Forced paths[] = {{AesGcm::Path::gnutls, "0"}, {AesGcm::Path::avx2, "avx2"}, {AesGcm::Path::avx512, "avx512"}};
    const char* saved = std::getenv("ESPVPN_GCM_VAES");
    const std::string before = saved ? saved : "";
    for (auto c : {EspCipher::aes128_gcm, EspCipher::aes256_gcm}) {
        const EspSuite suite{c, EspIntegrity::none};
        auto keys = bench_keys(suite);
        for (std::size_t size : {std::size_t{64}, std::size_t{1400}}) {
            SealOpen gnutls{};
            for (const Forced& f : paths) {
                if (!AesGcm::cpu_has(f.path)) {
                    std::printf("| %s | %s | %zu | not on this CPU | | | | |\n", AesGcm::name(f.path),
                                std::string(suite.name()).c_str(), size);
                    continue;
                }
                ::setenv("ESPVPN_GCM_VAES", f.value, 1);
                die_if(AesGcm::chosen() != f.path, "ESPVPN_GCM_VAES did not select the path");
                const SealOpen r = seal_and_open(o, keys, size);
                if (f.path == AesGcm::Path::gnutls) gnutls = r;
                std::printf("| %s | %s | %zu | %.2f | %.2f | %.2f | %.2f | %.2fx, %.2fx |\n", AesGcm::name(f.path),
                            std::string(suite.name()).c_str(), size, r.seal.gbit_per_s, r.seal.cycles_per_byte,
                            r.open_gbps, r.open_cpb, r.seal.cycles_per_byte / gnutls.seal.cycles_per_byte,
                            r.open_cpb / gnutls.open_cpb);
            }
        }
    }
    if (saved) ::setenv("ESPVPN_GCM_VAES", before.c_str(), 1);
    else ::unsetenv("ESPVPN_GCM_VAES");
}

// CBC encryption of a batch: Nettle's cbc_aes128_encrypt one packet after another (what the
// sealer did before) vs crypto/aes_cbc_lanes (8 packets side by side), the same bytes.
void run_cbc_lanes(const Options& o) {
    std::printf("\n## AES-128-CBC encrypt of a batch of %zu packets: one at a time (Nettle) vs side by side "
                "(crypto/aes_cbc_lanes)\n\n", kSealBatch);
    std::printf("| bytes per packet | Nettle, one at a time | lanes | lanes / Nettle |\n|---:|---:|---:|---:|\n");
    std::uint8_t key[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
    aes128_ctx nettle;
    aes128_set_encrypt_key(&nettle, key);
    AesCbcLanes lanes;
    die_if(!lanes.set_key(key, sizeof key), "AesCbcLanes::set_key failed");
    for (std::size_t size : kSizes) {
        const std::size_t len = (size + 15) / 16 * 16;
        std::vector<std::vector<std::uint8_t>> texts(kSealBatch, std::vector<std::uint8_t>(len, 0x44));
        std::vector<std::uint8_t> iv(16, 0x17);
        std::vector<AesCbcMessage> msgs;
        for (auto& t : texts) msgs.push_back({iv.data(), t.data(), len});
        auto one = measure(len * kSealBatch, o.seconds,
                           [&](std::uint64_t) {
                               for (auto& t : texts) {
                                   std::uint8_t chain[16];
                                   std::memcpy(chain, iv.data(), sizeof chain);
                                   cbc_aes128_encrypt(&nettle, chain, len, t.data(), t.data());
                               }
                           },
                           o.rounds);
        auto side = measure(len * kSealBatch, o.seconds, [&](std::uint64_t) { lanes.encrypt(msgs); }, o.rounds);
        std::printf("| %zu | %.2f Gbit/s (%.2f c/B) | %.2f Gbit/s (%.2f c/B) | %.1fx |\n", len, one.gbit_per_s,
                    one.cycles_per_byte, side.gbit_per_s, side.cycles_per_byte, side.gbit_per_s / one.gbit_per_s);
    }
    if (!lanes.interleaved()) std::printf("\n(no AES-NI: the lanes fall back to Nettle)\n");
}

// The kernel's share of the per-byte floor: a tunnel copies every byte once into user space
// (tun read / UDP receive) and once back (UDP send / tun write). Measured as one write() and
// one read() of the same bytes through a pipe on this thread (both copies in its CPU time).
void run_kernel_copies(const Options& o) {
    std::printf("\n## Kernel copies (one write() + one read() through a pipe: a copy in and a copy out)\n\n");
    std::printf("| copy | bytes | Gbit/s | c/B |\n|---|---:|---:|---:|\n");
    int p[2];
    die_if(::pipe(p) != 0, "pipe failed");
    (void)::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    for (std::size_t size : {std::size_t{1400}, std::size_t{65536}}) {
        std::vector<std::uint8_t> in(size, 0x33), out(size);
        auto t = measure(size, o.seconds,
                         [&](std::uint64_t) {
                             die_if(::write(p[1], in.data(), size) != static_cast<ssize_t>(size), "pipe write failed");
                             die_if(::read(p[0], out.data(), size) != static_cast<ssize_t>(size), "pipe read failed");
                         },
                         o.rounds);
        std::printf("| kernel copy in+out | %zu | %.2f | %.2f |\n", size, t.gbit_per_s, t.cycles_per_byte);
    }
    ::close(p[0]);
    ::close(p[1]);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows when piped
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) {
            o.seconds = 0.002;
            o.rounds = 1;
        } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
            o.seconds = std::atof(argv[++i]);
        } else if (!std::strcmp(argv[i], "--no-primitives")) {
            o.primitives = false;
        } else if (!std::strcmp(argv[i], "--gcm-paths")) {
            o.gcm_paths_only = true;
        } else {
            std::fprintf(stderr, "usage: bench-esp [--quick] [--seconds S] [--no-primitives] [--gcm-paths]\n"
                                 "  --no-primitives: only the ESP table and the kernel copies\n"
                                 "  --gcm-paths: only the ESP AES-GCM rows for each path (GnuTLS, VAES-AVX2, "
                                 "VAES-AVX-512)\n");
            return 2;
        }
    }
    std::printf("# bench-esp\n\nCPU: %s\nTSC: %.3f GHz (cycles/byte = thread CPU time x TSC rate)\n%s\n",
                cpu_model().c_str(), tsc_hz() / 1e9, describe(detect_cpu_features()).c_str());
    std::printf("AES-GCM: %s (ESPVPN_GCM_VAES)\n", AesGcm::name(AesGcm::chosen()));
    std::printf("Each figure: best of %d rounds of %.3f s CPU time.\n", o.rounds, o.seconds);
    if (o.gcm_paths_only) {
        run_gcm_paths(o);
        return 0;
    }
    run_esp(o);
    run_kernel_copies(o);
    if (o.primitives) {
        run_gcm_paths(o);
        run_primitives(o);
        run_cbc_lanes(o);
    }
    return 0;
}
