#include "src/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "src/io/unique_fd.h"

namespace espvpn::io {

int descriptor_of(const std::string& path) {
    for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
        if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0) continue;
        int n = 0;
        for (char c : std::string_view(path).substr(prefix.size())) {
            if (c < '0' || c > '9' || n > 100000) return -1;
            n = n * 10 + (c - '0');
        }
        return n;
    }
    return -1;
}

Result<Secret> read_input_file(const std::string& path, std::size_t max) {
    auto failed = [&](int e) { return make_error("cannot read " + path + ": " + std::strerror(e)); };
    UniqueFd owned;
    int fd = descriptor_of(path);
    if (fd < 0) {
        owned.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!owned.valid()) return failed(errno);
        fd = owned.get();
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0) return failed(errno);
    if (S_ISDIR(st.st_mode)) return failed(EISDIR);
    // A regular file: its size (pread, the descriptor's offset untouched); a pipe (a key the
    // NetworkManager service writes): what comes before EOF, at most 64 KiB.
    const bool regular = S_ISREG(st.st_mode);
    const std::size_t want = regular ? static_cast<std::size_t>(st.st_size) : std::min<std::size_t>(max, 64 << 10);
    if (regular && want > max) return make_error("cannot read " + path + ": larger than " + std::to_string(max) + " bytes");
    Secret out(want + 1);
    std::size_t got = 0;
    while (got < want + 1) {
        const ssize_t n = regular ? ::pread(fd, out.reveal_mutable().data() + got, want + 1 - got, static_cast<off_t>(got))
                                  : ::read(fd, out.reveal_mutable().data() + got, want + 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return failed(errno);
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    if (got > want) return make_error("cannot read " + path + ": it grew while being read, or is too large");
    return Secret(out.reveal().first(got));
}

}  // namespace espvpn::io
