// Proves the ESP hot path allocates nothing: this program replaces malloc/calloc/realloc
// (forwarding to glibc) and counts calls made while packets are sealed and opened.
// Not built with sanitizers, which own malloc themselves.
#include <cstddef>
#include <cstdio>
#include <utility>
#include <vector>

#include "protocols/esp/esp_sa.h"

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
}

static bool counting = false;
static long allocations = 0;

extern "C" void* malloc(std::size_t n) {
    if (counting) ++allocations;
    return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t a, std::size_t b) {
    if (counting) ++allocations;
    return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, std::size_t n) {
    if (counting) ++allocations;
    return __libc_realloc(p, n);
}

int main() {
    using namespace espvpn;
    int failures = 0;
    const std::pair<const char*, const char*> suites[] = {
        {"aes-128-gcm", ""}, {"aes-256-gcm", ""}, {"aes-128-cbc", "sha1"}, {"aes-256-cbc", "sha256"}, {"aes-128-cbc", "md5"}};
    for (auto [enc, auth] : suites) {
        EspSuite s = esp_suite_from_names(enc, auth).value();
        auto keys = EspSaKeys::create(s, Secret(s.enc_key_size()), Secret(s.auth_key_size())).value();
        auto out = EspOutboundSa::create(1, keys).value();
        EspInboundSas in;
        in.install(EspInboundSa::create(1, keys).value());
        std::vector<std::uint8_t> buf(kEspMaxHeadroom + 1400 + kEspMaxTailroom);
        std::vector<std::uint8_t> forged(200, 0x33);  // our SPI, garbage after it
        forged[0] = forged[1] = forged[2] = 0;
        forged[3] = 1;
        allocations = 0;
        int opened = 0;
        counting = true;
        for (int i = 0; i < 1000; ++i) {
            EspSealResult r = out.seal(buf, kEspMaxHeadroom, 1400, kEspNextHeaderIpv4);
            opened += r.ok() && in.open(r.packet).ok();
        }
        opened -= in.open(forged).ok();  // rejections must not allocate either
        counting = false;
        std::printf("%s/%s: %d of 1000 opened, %ld allocations\n", enc, auth, opened, allocations);
        if (opened != 1000 || allocations != 0) ++failures;
    }
    return failures == 0 ? 0 : 1;
}
