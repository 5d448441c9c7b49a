// The argv / envp arrays execve and posix_spawn take: pointers into `strings`
// (which must outlive the array, unchanged), null-terminated.
#pragma once

#include <string>
#include <vector>

namespace espvpn {

inline std::vector<char*> exec_array(std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (std::string& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace espvpn
