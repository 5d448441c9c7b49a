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
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        f.aes_ni = c & (1u << 25);
        f.pclmul = c & (1u << 1);
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = b & (1u << 5);
        f.sha_ni = b & (1u << 29);
        f.vaes = c & (1u << 9);
        f.vpclmulqdq = c & (1u << 10);
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
    return s;
}

}  // namespace espvpn
