#include "src/sandbox/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace espvpn::sandbox {
namespace {

// The kernel's Landlock ABI (include/uapi/linux/landlock.h), spelled out here because
// Debian 12's headers (Linux 6.1) stop at ABI 2; the values are a stable kernel ABI.
struct RulesetAttr {
    std::uint64_t handled_access_fs;
    std::uint64_t handled_access_net;  // ABI 4
    std::uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) PathBeneathAttr {
    std::uint64_t allowed_access;
    std::int32_t parent_fd;
};
constexpr unsigned kCreateRulesetVersion = 1U << 0;
constexpr int kRulePathBeneath = 1;

constexpr std::uint64_t kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2,
                        kReadDir = 1ULL << 3, kRemoveDir = 1ULL << 4, kRemoveFile = 1ULL << 5,
                        kMakeChar = 1ULL << 6, kMakeDir = 1ULL << 7, kMakeReg = 1ULL << 8,
                        kMakeSock = 1ULL << 9, kMakeFifo = 1ULL << 10, kMakeBlock = 1ULL << 11,
                        kMakeSym = 1ULL << 12;
constexpr std::uint64_t kRefer = 1ULL << 13;     // ABI 2
constexpr std::uint64_t kTruncate = 1ULL << 14;  // ABI 3
constexpr std::uint64_t kIoctlDev = 1ULL << 15;  // ABI 5
constexpr std::uint64_t kScopeSignal = 1ULL << 1;  // ABI 6 (bit 0: abstract Unix sockets, not used)

// Rights that make sense on a file (the others only on a directory).
constexpr std::uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;

std::uint64_t fs_rights_of(int abi) {
    std::uint64_t r = kExecute | kWriteFile | kReadFile | kReadDir | kRemoveDir | kRemoveFile | kMakeChar |
                      kMakeDir | kMakeReg | kMakeSock | kMakeFifo | kMakeBlock | kMakeSym;
    if (abi >= 2) r |= kRefer;
    if (abi >= 3) r |= kTruncate;
    if (abi >= 5) r |= kIoctlDev;
    return r;
}

constexpr std::uint64_t kReadExec = kExecute | kReadFile | kReadDir;
constexpr std::uint64_t kDevice = kReadFile | kWriteFile | kTruncate | kIoctlDev;

struct Fd {
    int fd;
    explicit Fd(int v) : fd(v) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

Status refused(const std::string& what) { return make_error("landlock: " + what + ": " + std::strerror(errno)); }

// Adds `path` with `rights` (masked to what the ruleset handles and, for a file, to file
// rights). A missing path: skipped when `optional`, else an Error.
Status add_rule(int ruleset, const std::string& path, std::uint64_t rights, std::uint64_t handled, bool optional) {
    Fd fd(open(path.c_str(), O_PATH | O_CLOEXEC));
    if (fd.fd < 0) {
        if (optional && (errno == ENOENT || errno == ENOTDIR || errno == EACCES)) return {};
        return refused(path);
    }
    struct stat st {};
    if (fstat(fd.fd, &st) != 0) return refused(path);
    PathBeneathAttr attr{};
    attr.allowed_access = rights & handled & (S_ISDIR(st.st_mode) ? ~0ULL : kFileRights);
    attr.parent_fd = fd.fd;
    if (attr.allowed_access == 0) return {};
    if (syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &attr, 0) != 0) return refused("add_rule " + path);
    return {};
}

bool disabled() {
    const char* v = std::getenv("ESPVPN_LANDLOCK");
    return v && std::strcmp(v, "0") == 0;
}

}  // namespace

int landlock_abi() {
    if (disabled()) return 0;
    const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
    return v > 0 ? static_cast<int>(v) : 0;  // ENOSYS: not built; EOPNOTSUPP: not enabled
}

std::string landlock_description(int abi) {
    if (abi <= 0) return "Landlock: none (the kernel has no Landlock, or ESPVPN_LANDLOCK=0)";
    return "Landlock ABI " + std::to_string(abi);
}

std::string path_landlock_cannot_follow(const FileRules& rules) {
    if (landlock_abi() == 0) return "";
    // The paths this process can open now; a child then tries them under the rules.
    std::vector<std::string> paths;
    auto opens = [](const std::string& p) {
        const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) return false;
        ::close(fd);
        return true;
    };
    for (const std::vector<std::string>* list : {&rules.read_only, &rules.read_write, &rules.executable})
        for (const std::string& p : *list)
            if (opens(p)) paths.push_back(p);
    for (const char* p : {"/usr", "/etc"})
        if (opens(p)) paths.emplace_back(p);
    const pid_t child = fork();
    if (child < 0) return "";  // no trial: the rules are applied as they are
    if (child == 0) {
        if (!restrict_files(rules)) _exit(0);
        for (std::size_t i = 0; i < paths.size() && i < 250; ++i)
            if (const int fd = ::open(paths[i].c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK); fd < 0) {
                if (errno == EACCES) _exit(static_cast<int>(i) + 1);
            } else {
                ::close(fd);
            }
        _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) == 0) return "";
    return paths[static_cast<std::size_t>(WEXITSTATUS(status)) - 1];
}

Result<int> restrict_files(const FileRules& rules) {
    const int abi = landlock_abi();
    if (abi == 0) return 0;
    RulesetAttr attr{};
    attr.handled_access_fs = fs_rights_of(abi);
    if (abi >= 6) attr.scoped = kScopeSignal;
    const std::uint64_t handled = attr.handled_access_fs;
    Fd ruleset(static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0)));
    if (ruleset.fd < 0) return refused("create_ruleset").error();

    for (const char* p : {"/usr", "/etc", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/opt",
                          "/sys/devices/system/cpu", "/proc/self"})
        if (Status s = add_rule(ruleset.fd, p, kReadExec, handled, true); !s) return s.error();
    // /etc/resolv.conf is often a link into /run (systemd-resolved, resolvconf, NetworkManager),
    // rewritten by rename: its directory, read only.
    if (char real[PATH_MAX]; realpath("/etc/resolv.conf", real)) {
        std::string dir(real);
        dir.resize(dir.rfind('/') == 0 ? 1 : dir.rfind('/'));
        if (Status s = add_rule(ruleset.fd, dir, kReadFile | kReadDir, handled, true); !s) return s.error();
    }
    for (const char* p : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"})
        if (Status s = add_rule(ruleset.fd, p, kDevice, handled, true); !s) return s.error();
    for (const std::string& p : rules.read_only)
        if (Status s = add_rule(ruleset.fd, p, kReadFile | kReadDir, handled, false); !s) return s.error();
    for (const std::string& p : rules.read_write)
        if (Status s = add_rule(ruleset.fd, p, handled, handled, false); !s) return s.error();
    for (const std::string& p : rules.executable)
        if (Status s = add_rule(ruleset.fd, p, kReadExec, handled, false); !s) return s.error();

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return refused("PR_SET_NO_NEW_PRIVS").error();
    if (syscall(SYS_landlock_restrict_self, ruleset.fd, 0) != 0) return refused("restrict_self").error();
    return abi;
}

}  // namespace espvpn::sandbox
