// Test helper: the VmFlags line of /proc/self/smaps for the mapping that holds `p`
// (" dd " = MADV_DONTDUMP, " lo " = mlock'ed), with a space at each end; "" when none.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace espvpn::test {

inline std::string vm_flags_of(const void* p) {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        unsigned long lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = addr >= lo && addr < hi;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line + " ";
    }
    return {};
}

}  // namespace espvpn::test
