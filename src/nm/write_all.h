// Writes all of `bytes` to a pipe or terminal fd (EINTR retried); false on any
// other failure. Shared by the service (espvpn's stdin) and the auth dialog.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace espvpn::nm {

inline bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace espvpn::nm
