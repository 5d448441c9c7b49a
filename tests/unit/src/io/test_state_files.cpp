// LocalStateFiles (src/io/state_files.h), the state files of a session written in this
// process (issue 41): a symlink at the file's name or at its temporary name is refused and
// never followed, a file of another user is rewritten as that user (the filesystem uid of
// the writing thread, not a chown), and reads find nothing, a file, or a clear error.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "src/io/state_files.h"
#include "tests/unit/planted_dirs.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

const std::string kOld = "old content\n";
const std::string kNew = "new content\n";

// The scratch directories of planted_dirs.h, a LocalStateFiles and a file name in the
// directory nobody can write.
struct Scratch : PlantedDirs {
    io::LocalStateFiles files;
    std::string path = shared + "/state";
};

// Every case plants as nobody or writes nobody's files: root only.
bool as_root() {
    if (::geteuid() == 0) return true;
    MESSAGE("skipped: needs root (another user's files and root's writes)");
    return false;
}

struct stat lstat_of(const std::string& path) {
    struct stat st{};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st;
}

}  // namespace

TEST_CASE("LocalStateFiles::read: nothing there, a file with its owner and mode, a symlink or a FIFO refused") {
    if (!as_root()) return;
    Scratch d;
    auto& files = d.files;
    const std::string& path = d.path;
    auto none = files.read(path);
    REQUIRE(none);
    CHECK_FALSE(none->has_value());

    spit(path, kOld);
    REQUIRE(::chown(path.c_str(), d.nobody, d.nogroup) == 0);
    REQUIRE(::chmod(path.c_str(), 0640) == 0);
    auto got = files.read(path);
    REQUIRE(got);
    REQUIRE(got->has_value());
    CHECK((*got)->bytes.reveal_text() == kOld);
    CHECK((*got)->uid == d.nobody);
    CHECK((*got)->gid == d.nogroup);
    CHECK((*got)->mode == 0640);

    const std::string secret = d.root_only + "/secret";
    spit(secret, "root's\n");
    const std::string link = d.shared + "/link";
    d.plant(link, secret);
    auto linked = files.read(link);
    REQUIRE_FALSE(linked);
    CHECK(linked.error().message.find("is a symlink") != std::string::npos);
    CHECK(linked.error().message.find("root's") == std::string::npos);

    // A FIFO is refused at once (opened non-blocking), not waited on.
    const std::string fifo = d.shared + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto piped = files.read(fifo);
    REQUIRE_FALSE(piped);
    CHECK(piped.error().message.find("not a regular file") != std::string::npos);

    spit(path, std::string(io::kMaxStateFile + 1, 'x'));
    auto big = files.read(path);
    REQUIRE_FALSE(big);
    CHECK(big.error().message.find("larger than 64 KiB") != std::string::npos);
}

TEST_CASE("LocalStateFiles::write: a symlink at the file's name is refused, not replaced or written through") {
    if (!as_root()) return;
    Scratch d;
    auto& files = d.files;
    const std::string victim = d.root_only + "/victim";
    spit(victim, kOld);
    const std::string& path = d.path;
    d.plant(path, victim);
    auto st = files.write(path, kNew, io::Sync::yes, 0600);
    REQUIRE_FALSE(st);
    CHECK(st.error().message.find("is a symlink") != std::string::npos);
    CHECK(S_ISLNK(lstat_of(path).st_mode));
    CHECK(slurp(victim) == kOld);
    CHECK_FALSE(exists(path + std::string(io::kStateTmpSuffix)));
    // A link to a file that does not exist yet: nothing is created at its target either.
    const std::string nowhere = d.root_only + "/cron-entry";
    ::unlink(path.c_str());
    d.plant(path, nowhere);
    CHECK_FALSE(files.write(path, kNew, io::Sync::no, 0644));
    CHECK_FALSE(exists(nowhere));
}

TEST_CASE("LocalStateFiles::write: a symlink planted at the temporary name is refused, never followed") {
    if (!as_root()) return;
    Scratch d;
    auto& files = d.files;
    const std::string& path = d.path;
    const std::string tmp = path + std::string(io::kStateTmpSuffix);
    const std::string target = d.root_only + "/cron-entry";
    for (bool there : {false, true}) {  // with and without a file at the name itself
        CAPTURE(there);
        if (there) spit(path, kOld);
        d.plant(tmp, target);
        auto st = files.write(path, kNew, io::Sync::yes, 0600);
        REQUIRE_FALSE(st);
        CHECK(st.error().message.find("symlink is already there") != std::string::npos);
        CHECK(st.error().message.find(tmp) != std::string::npos);
        CHECK_FALSE(exists(target));
        CHECK(S_ISLNK(lstat_of(tmp).st_mode));
        CHECK(exists(path) == there);
        if (there) CHECK(slurp(path) == kOld);
        ::unlink(tmp.c_str());
    }
}

TEST_CASE("LocalStateFiles::write: another user's file is rewritten as that user, with its mode") {
    if (!as_root()) return;
    Scratch d;
    auto& files = d.files;
    const std::string& path = d.path;
    spit(path, kOld);
    REQUIRE(::chown(path.c_str(), d.nobody, d.nogroup) == 0);
    REQUIRE(::chmod(path.c_str(), 0640) == 0);
    REQUIRE(files.write(path, kNew, io::Sync::yes, 0600));
    auto st = lstat_of(path);
    CHECK(S_ISREG(st.st_mode));
    CHECK(st.st_uid == d.nobody);
    CHECK(st.st_gid == d.nogroup);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(slurp(path) == kNew);
    CHECK_FALSE(exists(path + std::string(io::kStateTmpSuffix)));

    // Written as nobody, not by root and chowned: in a directory only root may write, nobody's
    // file cannot be replaced.
    const std::string locked = d.root_only + "/state";
    spit(locked, kOld);
    REQUIRE(::chown(locked.c_str(), d.nobody, d.nogroup) == 0);
    auto refused = files.write(locked, kNew, io::Sync::yes, 0600);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("Permission denied") != std::string::npos);
    CHECK(slurp(locked) == kOld);
    CHECK_FALSE(exists(locked + std::string(io::kStateTmpSuffix)));

    // Nothing there: a new file of the writer's, with exactly the mode asked (not the umask's).
    const std::string fresh = d.shared + "/fresh";
    const mode_t old_mask = ::umask(077);
    auto made = files.write(fresh, kNew, io::Sync::no, 0644);
    ::umask(old_mask);
    REQUIRE(made);
    st = lstat_of(fresh);
    CHECK(st.st_uid == ::geteuid());
    CHECK((st.st_mode & 07777) == 0644);
    CHECK(slurp(fresh) == kNew);
}

TEST_CASE("LocalStateFiles::remove: a file, nothing, and a symlink (the link goes, not its target)") {
    if (!as_root()) return;
    Scratch d;
    auto& files = d.files;
    const std::string& path = d.path;
    spit(path, kOld);
    auto gone = files.remove(path);
    REQUIRE(gone);
    CHECK(*gone);
    CHECK_FALSE(exists(path));
    auto again = files.remove(path);
    REQUIRE(again);
    CHECK_FALSE(*again);

    const std::string target = d.root_only + "/kept";
    spit(target, kOld);
    d.plant(path, target);
    REQUIRE(files.remove(path));
    CHECK_FALSE(exists(path));
    CHECK(slurp(target) == kOld);
}
