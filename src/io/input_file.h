// The bytes of a file the user named (a certificate, a key, a CA file, a token key).
// "/dev/fd/N" is read from descriptor N itself (pread from offset 0, the descriptor left
// open): the session process of the privilege split gets its files opened before the
// fork as /dev/fd/N, and having switched user it could not reopen /proc/self/fd/N of a
// file only root may read (the reopen checks the inode's permissions). Any other path is
// opened O_RDONLY|O_CLOEXEC. Errors name the path and why.
#pragma once

#include <cstddef>
#include <string>

#include "crypto/secret.h"
#include "protocols/base/result.h"

namespace espvpn::io {

inline constexpr std::size_t kMaxInputFile = 16 << 20;

Result<Secret> read_input_file(const std::string& path, std::size_t max = kMaxInputFile);

// N of "/dev/fd/N" (or "/proc/self/fd/N"), -1 for another path.
int descriptor_of(const std::string& path);

}  // namespace espvpn::io
