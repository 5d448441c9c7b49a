// The HOTP counter written back into a token file that sits in a directory another user
// can write (issue 41): a symlink planted at the temporary name or at the token file is
// never followed, and the new file is the token file's owner's, with its mode.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "src/session/soft_token.h"
#include "tests/unit/planted_dirs.h"
#include "tests/unit/state_files_fake.h"

using namespace espvpn;
using namespace espvpn::session;
using namespace espvpn::test;

namespace {

const char* kToken = "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,0\n";

// The first code from the token file; the error of the token or of the code.
Result<Secret> one_code(const std::string& file) {
    io::LocalStateFiles files;
    auto token = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@" + file), files);
    if (!token) return token.error();
    return (*token)->next_code();
}

}  // namespace

TEST_CASE("HOTP write-back: a symlink planted at the temporary name is not followed") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: needs root (the attack is on root's write)");
        return;
    }
    PlantedDirs d;
    // The token file root's or the user's: the planted name is refused either way.
    for (bool users : {false, true}) {
        CAPTURE(users);
        const std::string tok = d.shared + "/token";
        spit(tok, kToken);
        if (users) REQUIRE(::chown(tok.c_str(), d.nobody, d.nogroup) == 0);
        const std::string target = d.root_only + "/cron-entry";
        d.plant(tok + ".espvpn-new", target);
        auto code = one_code(tok);
        CHECK_FALSE(code);
        if (!code) {
            CHECK(code.error().message.find("symlink is already there") != std::string::npos);
            CHECK(code.error().message.find(tok + ".espvpn-new") != std::string::npos);
        }
        CHECK_FALSE(exists(target));
        CHECK(slurp(tok) == kToken);
        ::unlink((tok + ".espvpn-new").c_str());
        ::unlink(tok.c_str());
    }
}

TEST_CASE("HOTP write-back: a token file that is a symlink is not replaced or written through") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: needs root");
        return;
    }
    PlantedDirs d;
    const std::string real = d.root_only + "/token";
    spit(real, kToken);
    const std::string tok = d.shared + "/token";
    d.plant(tok, real);
    auto code = one_code(tok);
    REQUIRE_FALSE(code);
    CHECK(code.error().message.find("is a symlink") != std::string::npos);
    struct stat st{};
    REQUIRE(::lstat(tok.c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(slurp(real) == kToken);
    CHECK_FALSE(exists(tok + ".espvpn-new"));
}

TEST_CASE("HOTP write-back: the new file is the token file owner's, with its mode") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: needs root");
        return;
    }
    PlantedDirs d;
    const std::string tok = d.shared + "/token";
    spit(tok, kToken);
    REQUIRE(::chown(tok.c_str(), d.nobody, d.nogroup) == 0);
    REQUIRE(::chmod(tok.c_str(), 0640) == 0);
    auto code = one_code(tok);
    REQUIRE(code);
    CHECK(code->reveal_text() == "755224");  // RFC 4226's first code
    struct stat st{};
    REQUIRE(::lstat(tok.c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK(st.st_uid == d.nobody);
    CHECK(st.st_gid == d.nogroup);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(slurp(tok).find(",1") != std::string::npos);
    CHECK_FALSE(exists(tok + ".espvpn-new"));
}

// The privilege split's session cannot open a root-owned token file: the file must travel
// through StateFiles (the broker's read_state/write_state), not be opened here.
TEST_CASE("HOTP: the token file is read, re-read and written back through StateFiles, nothing else") {
    char dir[] = "/tmp/espvpn-hotp-fake-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string tok = std::string(dir) + "/token";  // not on disk: only StateFiles has it
    using Op = RecordingStateFiles::Call::Op;
    {
        RecordingStateFiles files;
        files.files[tok] = {kToken, 0600};
        auto token = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@" + tok), files);
        REQUIRE(token);
        REQUIRE(files.calls.size() == 1);
        CHECK(files.calls[0].op == Op::read);
        CHECK(files.calls[0].path == tok);
        auto first = (*token)->next_code();
        REQUIRE(first);
        CHECK(first->reveal_text() == "755224");  // RFC 4226, counter 0
        REQUIRE(files.calls.size() == 3);
        CHECK(files.calls[1].op == Op::read);  // another process may have used the token since
        CHECK(files.calls[1].path == tok);
        CHECK(files.calls[2].op == Op::write);
        CHECK(files.calls[2].path == tok);
        CHECK(files.calls[2].bytes == "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,1");
        CHECK(files.calls[2].sync == io::Sync::yes);
        CHECK_FALSE(exists(tok));
        // The second code takes the counter StateFiles holds now.
        auto second = (*token)->next_code();
        REQUIRE(second);
        CHECK(second->reveal_text() == "287082");  // counter 1
        CHECK(files.of(Op::write).back().bytes == "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ,2");
    }
    {
        // A write the other side refuses: no code is given (it would be used twice next run).
        RecordingStateFiles refusing;
        refusing.files[tok] = {kToken, 0600};
        refusing.fail_writes = "no";
        auto token = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@" + tok), refusing);
        REQUIRE(token);
        auto code = (*token)->next_code();
        REQUIRE_FALSE(code);
        CHECK(code.error().message.find("not written back") != std::string::npos);
        // Nothing there: no token; gone since the start: no code, no write.
        RecordingStateFiles empty;
        auto none = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@" + tok), empty);
        REQUIRE_FALSE(none);
        CHECK(none.error().message.find(tok) != std::string::npos);
        RecordingStateFiles vanishing;
        vanishing.files[tok] = {kToken, 0600};
        auto again = make_soft_token(SoftTokenMode::hotp, Secret::from_string("@" + tok), vanishing);
        REQUIRE(again);
        vanishing.files.clear();
        CHECK_FALSE((*again)->next_code());
        CHECK(vanishing.of(Op::write).empty());
    }
    {
        // A TOTP file is an input (NetworkManager passes /dev/fd/N), read directly; nothing is written.
        spit(tok, "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ\n");
        RecordingStateFiles none;
        auto totp = make_soft_token(SoftTokenMode::totp, Secret::from_string("@" + tok), none);
        REQUIRE(totp);
        REQUIRE((*totp)->next_code());
        CHECK(none.calls.empty());
    }
    ::unlink(tok.c_str());
    ::rmdir(dir);
}
