#include "crypto/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace espvpn {

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
    bool os_saves_ymm = false, os_saves_zmm = false;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        f.aes_ni = c & (1u << 25);
        f.pclmul = c & (1u << 1);
        const bool avx = c & (1u << 28);
        if (avx && (c & (1u << 27))) {  // OSXSAVE: XCR0 says which registers the OS saves
            unsigned lo, hi;
            __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            os_saves_ymm = (lo & 0x06u) == 0x06u;  // SSE and the upper ymm halves
            os_saves_zmm = (lo & 0xe6u) == 0xe6u;  // those, opmask and both zmm halves
        }
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = os_saves_ymm && (b & (1u << 5));
        f.sha_ni = b & (1u << 29);
        f.vaes = c & (1u << 9);
        f.vpclmulqdq = c & (1u << 10);
        f.avx512 = os_saves_zmm && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31));  // F, BW, VL
    }
#endif
    return f;
}

std::string describe(const CpuFeatures& f) {
    auto yn = [](bool v) { return v ? "yes" : "no"; };
    std::string s;
    s += "AES-NI: ";
    s += yn(f.aes_ni);
    s += ", PCLMUL: ";
    s += yn(f.pclmul);
    s += ", SHA-NI: ";
    s += yn(f.sha_ni);
    s += ", AVX2: ";
    s += yn(f.avx2);
    s += ", VAES: ";
    s += yn(f.vaes);
    s += ", VPCLMULQDQ: ";
    s += yn(f.vpclmulqdq);
    s += ", AVX-512: ";
    s += yn(f.avx512);
    return s;
}

}  // namespace espvpn
