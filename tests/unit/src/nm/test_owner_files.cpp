// Issue 41's confused deputy under NetworkManager: the files a user's profile names are
// opened with that user's rights, never root's. The decision (whose profile, which items
// are paths) and the opening itself (as root, for the user nobody).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "src/nm/espvpn_command.h"
#include "src/nm/owner_files.h"
#include "tests/unit/src/nm/vpn_settings_fixture.h"

using namespace espvpn;
using namespace espvpn::nm;

namespace {

EspvpnCommand build(const VpnSettings& s) {
    auto cmd = espvpn_command("/usr/sbin/espvpn", "helper", s, 0);
    if (!cmd) FAIL("unexpected error: " << cmd.error().message);
    return std::move(*cmd);
}

std::vector<std::string> items_of(const std::vector<ProfileFile>& files) {
    std::vector<std::string> items;
    for (const auto& f : files) items.push_back(f.item);
    return items;
}

}  // namespace

TEST_CASE("profile owner: no permissions = system profile; one user = theirs; anything else shared") {
    CHECK(profile_owner({}).kind == ProfileOwner::Kind::system);
    const ProfileOwner alice = profile_owner({{"user", "alice"}});
    CHECK(alice.kind == ProfileOwner::Kind::user);
    CHECK(alice.user == "alice");
    CHECK(profile_owner({{"user", "alice"}, {"user", "bob"}}).kind == ProfileOwner::Kind::shared);
    CHECK(profile_owner({{"group", "staff"}}).kind == ProfileOwner::Kind::shared);
    CHECK(profile_owner({{"user", ""}}).kind == ProfileOwner::Kind::shared);
}

TEST_CASE("profile files: usercert, userkey, cafile/cacert and a token key file are paths; pkcs11: URIs are not") {
    auto s = settings({{"gateway", "https://vpn.example.com/"},
                       {"usercert", "/home/alice/cert.pem"},
                       {"userkey", "/home/alice/key.pem"},
                       {"cafile", "/home/alice/ca.pem"},
                       {"useragent", "/not/a/file"},
                       {"token_mode", "totp"}},
                      {{"password", "pw"}, {"token_secret", "@/home/alice/totp"}});
    EspvpnCommand c = build(s);
    REQUIRE(items_of(c.files) == std::vector<std::string>{"usercert", "userkey", "cafile", "token_secret"});
    for (const auto& f : c.files) CHECK(c.argv.at(f.argv_index) == f.option + f.path);
    CHECK(c.files[3].path == "/home/alice/totp");
    CHECK_FALSE(c.files[3].written_back);

    // The descriptor replaces the path in argv, and only there.
    name_by_descriptor(c, c.files[0], kFirstFileFd);
    name_by_descriptor(c, c.files[3], kFirstFileFd + 3);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--certificate=/dev/fd/4") == 1);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--token-secret=@/dev/fd/7") == 1);
    CHECK(std::count(c.argv.begin(), c.argv.end(), "--sslkey=/home/alice/key.pem") == 1);
    CHECK(std::none_of(c.argv.begin(), c.argv.end(),
                       [](const std::string& a) { return a.find("cert.pem") != std::string::npos; }));

    // A token's URI, a cacert alias, a token key given as a file name without '@'.
    auto t = settings({{"gateway", "https://vpn.example.com/"},
                       {"usercert", "pkcs11:token=t;object=c;type=cert"},
                       {"cacert", "/etc/ssl/vpn-ca.pem"},
                       {"token_mode", "hotp"}},
                      {{"password", "pw"}, {"token_secret", "/home/alice/hotp"}});
    EspvpnCommand u = build(t);
    REQUIRE(items_of(u.files) == std::vector<std::string>{"cacert", "token_secret"});
    CHECK(u.files[1].option == "--token-secret=");
    CHECK(u.files[1].written_back);
    // The TOTP key as a value, not a file: no file.
    s.secrets["token_secret"] = Secret::from_string("base32:JBSWY3DPEHPK3PXP");
    CHECK(items_of(build(s).files) == std::vector<std::string>{"usercert", "userkey", "cafile"});
}

TEST_CASE("profile files: opened as the owner for a user's profile; as today for a system one; refused when unclear") {
    auto s = settings({{"gateway", "https://vpn.example.com/"}, {"usercert", "/root/key.pem"}}, {{"password", "pw"}});
    EspvpnCommand c = build(s);
    auto system = files_to_open(c, profile_owner({}));
    REQUIRE(system);
    CHECK(system->empty());  // the administrator's profile: espvpn opens the path itself
    auto user = files_to_open(c, profile_owner({{"user", "alice"}}));
    REQUIRE(user);
    CHECK(items_of(*user) == std::vector<std::string>{"usercert"});
    auto shared = files_to_open(c, profile_owner({{"user", "alice"}, {"user", "bob"}}));
    REQUIRE_FALSE(shared);
    CHECK(shared.error().message.find("'usercert'") != std::string::npos);
    // A shared profile that names no file is fine.
    s.data.erase("usercert");
    auto nofile = files_to_open(build(s), profile_owner({{"user", "alice"}, {"user", "bob"}}));
    REQUIRE(nofile);
    CHECK(nofile->empty());
    // An HOTP key file in a user's profile: its counter would be written back by root.
    auto h = settings({{"gateway", "https://vpn.example.com/"}, {"token_mode", "hotp"}},
                      {{"password", "pw"}, {"token_secret", "@/home/alice/hotp"}});
    auto hotp = files_to_open(build(h), profile_owner({{"user", "alice"}}));
    REQUIRE_FALSE(hotp);
    CHECK(hotp.error().message.find("HOTP") != std::string::npos);
    CHECK(files_to_open(build(h), profile_owner({})));
}

TEST_CASE("owner files: a root-only file is refused to its user like a missing one; the user's own file opens") {
    if (geteuid() != 0) {
        MESSAGE("skipped: needs root (opens files as the user nobody)");
        return;
    }
    const passwd* nobody = getpwnam("nobody");
    REQUIRE(nobody != nullptr);
    char dir_template[] = "/tmp/nm-owner-files.XXXXXX";
    REQUIRE(mkdtemp(dir_template) != nullptr);
    const std::string dir = dir_template;
    REQUIRE(chmod(dir.c_str(), 0755) == 0);
    const auto make = [&](const std::string& name, mode_t mode, uid_t uid, const char* text) {
        const std::string path = dir + "/" + name;
        const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, text, std::char_traits<char>::length(text)) > 0);
        REQUIRE(fchown(fd, uid, static_cast<gid_t>(-1)) == 0);
        REQUIRE(fchmod(fd, mode) == 0);
        close(fd);
        return path;
    };
    const std::string secret = make("root-key.pem", 0600, 0, "ROOT ONLY KEY");
    const std::string group_root = make("group-key.pem", 0640, 0, "ROOT GROUP KEY");  // root's groups are not nobody's
    const std::string own = make("own-key.pem", 0600, nobody->pw_uid, "NOBODY'S KEY");
    const std::string link = dir + "/link.pem";
    REQUIRE(symlink(secret.c_str(), link.c_str()) == 0);
    const auto file = [](const std::string& item, const std::string& path) {
        return ProfileFile{item, path, 0, "--x="};
    };

    std::string refused;
    for (const std::string& path : {secret, group_root, link, dir + "/missing.pem", dir}) {
        CAPTURE(path);
        auto r = open_as_owner("nobody", {file("usercert", own), file("userkey", path)});
        REQUIRE_FALSE(r);
        const std::string& msg = r.error().message;
        CHECK(msg.find("'userkey'") != std::string::npos);
        CHECK(msg.find("KEY") == std::string::npos);
        if (refused.empty()) refused = msg;
        CHECK(msg == refused);  // the same words whether the file exists or not
    }
    auto ok = open_as_owner("nobody", {file("usercert", own)});
    REQUIRE(ok);
    REQUIRE(ok->size() == 1);
    char buf[32] = {};
    CHECK(read(ok->front(), buf, sizeof buf - 1) == 12);
    CHECK(std::string(buf) == "NOBODY'S KEY");
    CHECK((fcntl(ok->front(), F_GETFD) & FD_CLOEXEC) != 0);
    close(ok->front());
    CHECK_FALSE(open_as_owner("no-such-user-espvpn", {file("usercert", own)}));

    for (const std::string& p : {secret, group_root, own, link}) unlink(p.c_str());
    rmdir(dir.c_str());
}

TEST_CASE("the session process runs as the profile's owner (--setuid), a system profile's as espvpn's default") {
    auto s = settings({{"gateway", "https://vpn.example.com/"}, {"usercert", "/home/alice/cert.pem"}}, {{"password", "pw"}});
    EspvpnCommand c = build(s);
    const auto before = c.argv;
    run_session_as_owner(c, profile_owner({}));
    CHECK(c.argv == before);
    run_session_as_owner(c, profile_owner({{"user", "alice"}, {"user", "bob"}}));
    CHECK(c.argv == before);
    // root's own profile: the session never runs as root (espvpn's default user instead).
    run_session_as_owner(c, profile_owner({{"user", "root"}}));
    CHECK(c.argv == before);
    run_session_as_owner(c, profile_owner({{"user", "alice"}}));
    REQUIRE(c.argv.size() == before.size() + 1);
    CHECK(c.argv[0] == before[0]);
    CHECK(c.argv[1] == "--setuid=alice");
    // The file entries still point at their own argv entries.
    for (const auto& f : c.files) CHECK(c.argv.at(f.argv_index) == f.option + f.path);
}
