// Which instruction-set extensions the CPU offers to the cipher code
// (GnuTLS and Nettle pick their accelerated paths from these).
#pragma once

#include <string>

namespace espvpn {

struct CpuFeatures {
    bool aes_ni = false;     // AES round instructions
    bool pclmul = false;     // carry-less multiply (GHASH for GCM)
    bool sha_ni = false;     // SHA-1/SHA-256 instructions
    bool avx2 = false;       // AVX2, with the OS saving the 256-bit registers
    bool vaes = false;       // vector AES (AVX2/AVX-512 widths)
    bool vpclmulqdq = false;
    bool avx512 = false;     // AVX-512 F, BW and VL, with the OS saving the 512-bit registers
    bool amd = false;        // vendor AuthenticAMD (some choices are by measurement per vendor)
};

CpuFeatures detect_cpu_features();
std::string describe(const CpuFeatures& f);

}  // namespace espvpn
