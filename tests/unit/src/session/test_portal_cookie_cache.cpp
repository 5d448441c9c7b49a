// The saved portal cookie (portal_cookie_cache.h): where it goes, its file format, expiry on
// load, and the file or directory that is not what espvpn made (a symlink, another mode) refused.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "src/session/gp/portal_cookie_cache.h"
#include "tests/unit/state_files_fake.h"

using namespace espvpn;
using namespace espvpn::session;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        std::string t = std::filesystem::temp_directory_path().string() + "/espvpn-cookie-test.XXXXXX";
        REQUIRE(::mkdtemp(t.data()));
        path = t;
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

http::Url portal(std::uint16_t port = 4443) {
    http::Url u;
    u.host = "vpn.example.com";
    u.port = port;
    return u;
}

SavedPortalCookie cookie(std::int64_t expires) {
    SavedPortalCookie c;
    c.user = "alice";
    c.userauthcookie = Secret::from_string("c00k1e+/=");
    c.expires = expires;
    return c;
}

io::LocalStateFiles local_files;

PortalCookieCache cache_in(const std::string& dir) {
    return PortalCookieCache(cookie_cache_location(::geteuid(), ::getegid(), "/home/x", false, dir.c_str()),
                             local_files);
}

}  // namespace

TEST_CASE("portal cookie cache: where it lives") {
    auto xdg = cookie_cache_location(1000, 1000, "/home/alice", false, "/tmp/state/");
    CHECK(xdg.path() == "/tmp/state/espvpn");
    CHECK_FALSE(xdg.by_root);
    CHECK(cookie_cache_location(1000, 1000, "/home/alice", false, nullptr).path() == "/home/alice/.local/state/espvpn");
    CHECK(cookie_cache_location(1000, 1000, "/home/alice", false, "relative").path() ==
          "/home/alice/.local/state/espvpn");
    auto root = cookie_cache_location(0, 0, "/root", true, nullptr);
    CHECK(root.path() == "/var/lib/espvpn/0");
    CHECK(root.by_root);
    CHECK(cookie_cache_location(1001, 1001, "/", false, nullptr).path() == "/var/lib/espvpn/1001");
    CHECK(PortalCookieCache::file_name(portal()) == "gp-portal-vpn.example.com_4443");
    http::Url v6;
    v6.host = "fd00::1";
    CHECK(PortalCookieCache::file_name(v6) == "gp-portal-fd00__1_443");
}

TEST_CASE("portal cookie cache: save, load, expiry, forget") {
    TempDir t;
    auto cache = cache_in(t.path);
    auto none = cache.load(portal(), 1000);
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
    REQUIRE(cache.save(portal(), cookie(2000)).ok());
    const std::string file = t.path + "/espvpn/gp-portal-vpn.example.com_4443";
    struct stat st{};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat((t.path + "/espvpn").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    auto got = cache.load(portal(), 1999);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK((*got)->user == "alice");
    CHECK((*got)->userauthcookie.reveal_text() == "c00k1e+/=");
    CHECK((*got)->prelogonuserauthcookie.empty());
    CHECK((*got)->expires == 2000);
    // Another port is another portal.
    CHECK_FALSE(cache.load(portal(443), 1999)->has_value());
    // At its expiry: not returned, and removed.
    auto expired = cache.load(portal(), 2000);
    REQUIRE(expired.ok());
    CHECK_FALSE(expired->has_value());
    CHECK_FALSE(std::filesystem::exists(file));

    REQUIRE(cache.save(portal(), cookie(5000)).ok());
    REQUIRE(cache.save(portal(443), cookie(5000)).ok());
    auto one = portal();
    CHECK(*cache.forget(&one) == 1);
    CHECK(*cache.forget(&one) == 0);
    CHECK(cache.load(portal(443), 1000)->has_value());
    CHECK(*cache.forget(nullptr) == 1);
    CHECK_FALSE(cache.load(portal(443), 1000)->has_value());
}

TEST_CASE("portal cookie cache: a planted symlink or a file not private is refused") {
    TempDir t;
    auto cache = cache_in(t.path);
    REQUIRE(cache.save(portal(), cookie(5000)).ok());
    const std::string file = t.path + "/espvpn/gp-portal-vpn.example.com_4443";
    const std::string elsewhere = t.path + "/elsewhere";
    std::filesystem::rename(file, elsewhere);
    REQUIRE(::symlink(elsewhere.c_str(), file.c_str()) == 0);
    auto linked = cache.load(portal(), 1000);
    REQUIRE_FALSE(linked.ok());
    CHECK(linked.error().message.find("symlink") != std::string::npos);
    CHECK(linked.error().message.find("c00k1e") == std::string::npos);
    // Saving replaces the link (rename), never writes through it.
    REQUIRE(cache.save(portal(), cookie(6000)).ok());
    CHECK_FALSE(std::filesystem::is_symlink(file));
    CHECK(cache.load(portal(), 1000)->value().expires == 6000);

    // A temporary file left by a killed run does not block the next save.
    { std::ofstream(file + ".espvpn-new") << "half"; }
    REQUIRE(cache.save(portal(), cookie(7000)).ok());
    CHECK(cache.load(portal(), 1000)->value().expires == 7000);
    CHECK_FALSE(std::filesystem::exists(file + ".espvpn-new"));

    REQUIRE(::chmod(file.c_str(), 0644) == 0);
    CHECK_FALSE(cache.load(portal(), 1000).ok());

    // The directory itself a symlink: refused, nothing made through it.
    TempDir u;
    const std::string target = u.path + "/target";
    REQUIRE(::mkdir(target.c_str(), 0700) == 0);
    REQUIRE(::symlink(target.c_str(), (u.path + "/espvpn").c_str()) == 0);
    auto via_link = cache_in(u.path);
    auto saved = via_link.save(portal(), cookie(5000));
    REQUIRE_FALSE(saved.ok());
    CHECK(saved.error().message.find("symlink") != std::string::npos);
    CHECK(std::filesystem::is_empty(target));
    CHECK_FALSE(via_link.load(portal(), 1000).ok());
}

TEST_CASE("portal cookie cache: the file format") {
    auto text = encode_saved_cookie(portal(), cookie(1234));
    CHECK(text.reveal_text() ==
          "espvpn-portal-cookie 1\nportal vpn.example.com:4443\nuser alice\nexpires 1234\n"
          "portal-userauthcookie c00k1e+/=\nportal-prelogonuserauthcookie \n");
    auto back = decode_saved_cookie(text.reveal_text());
    REQUIRE(back.ok());
    CHECK(back->userauthcookie.reveal_text() == "c00k1e+/=");
    CHECK_FALSE(decode_saved_cookie("something else\n").ok());
    CHECK_FALSE(decode_saved_cookie("espvpn-portal-cookie 1\nuser alice\nportal-userauthcookie x\n").ok());
    CHECK_FALSE(decode_saved_cookie("espvpn-portal-cookie 1\nuser alice\nexpires soon\nportal-userauthcookie x\n").ok());
    CHECK_FALSE(decode_saved_cookie("espvpn-portal-cookie 1\nuser alice\nexpires 5\n").ok());
    CHECK_FALSE(decode_saved_cookie("espvpn-portal-cookie 1\nuser al\x1bice\nexpires 5\nportal-userauthcookie x\n").ok());
    // Nothing with a control character is written.
    TempDir t;
    auto cache = cache_in(t.path);
    auto bad = cookie(5000);
    bad.userauthcookie = Secret::from_string("a\nuser mallory");
    CHECK_FALSE(cache.save(portal(), bad).ok());
}

// The privilege split's session cannot open root's cache (/var/lib/espvpn/0): the cookie
// files must travel through StateFiles (the broker's requests), not be opened here.
TEST_CASE("portal cookie cache: the cookie is stored, read and removed through StateFiles") {
    using Op = test::RecordingStateFiles::Call::Op;
    TempDir t;
    test::RecordingStateFiles files;
    files.uid = ::geteuid();
    PortalCookieCache cache(cookie_cache_location(::geteuid(), ::getegid(), "/home/x", false, t.path.c_str()), files);
    const std::string file = t.path + "/espvpn/gp-portal-vpn.example.com_4443";

    REQUIRE(cache.save(portal(), cookie(2000)).ok());
    auto writes = files.of(Op::write);
    REQUIRE(writes.size() == 1);
    CHECK(writes[0].path == file);
    CHECK(writes[0].sync == io::Sync::yes);
    CHECK(writes[0].new_mode == 0600);
    CHECK(writes[0].bytes == std::string(encode_saved_cookie(portal(), cookie(2000)).reveal_text()));
    CHECK_FALSE(std::filesystem::exists(file));  // nothing written here but through the interface

    auto got = cache.load(portal(), 1999);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK((*got)->userauthcookie.reveal_text() == "c00k1e+/=");
    CHECK(files.of(Op::read).back().path == file);

    // Refused when the file StateFiles read is not the user's private one.
    files.uid = ::geteuid() + 1;
    CHECK_FALSE(cache.load(portal(), 1999).ok());
    files.uid = ::geteuid();
    files.files[file].mode = 0644;
    CHECK_FALSE(cache.load(portal(), 1999).ok());
    files.files[file].mode = 0600;

    // Expired: removed through the interface.
    auto expired = cache.load(portal(), 2000);
    REQUIRE(expired.ok());
    CHECK_FALSE(expired->has_value());
    REQUIRE_FALSE(files.of(Op::remove).empty());
    CHECK(files.of(Op::remove).back().path == file);
    CHECK(files.files.empty());

    // Forgotten (the portal refused it, or --forget-cookies PORTAL): removed through it too.
    REQUIRE(cache.save(portal(), cookie(5000)).ok());
    auto one = portal();
    CHECK(*cache.forget(&one) == 1);
    CHECK(files.of(Op::remove).back().path == file);
    CHECK(files.files.empty());
    CHECK(*cache.forget(&one) == 0);

    // A failed write is the save's error.
    files.fail_writes = "the broker said no";
    auto refused = cache.save(portal(), cookie(5000));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "the broker said no");
}

TEST_CASE("portal cookie cache: a directory root prepared before the privilege split, out of the session's reach") {
    using Op = test::RecordingStateFiles::Call::Op;
    TempDir t;
    // Root (here: this process) makes and checks it before the fork.
    PortalCookieCache root_side(cookie_cache_location(::geteuid(), ::getegid(), "/home/x", false, t.path.c_str()),
                                local_files);
    auto prepared = root_side.prepare();
    REQUIRE(prepared.ok());
    CHECK(prepared->prepared);
    struct stat st{};
    REQUIRE(::stat(prepared->path().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);

    // The session cannot open it (here: it has gone): load, save and forget go through
    // StateFiles alone (the broker), at the same names.
    CookieCacheLocation where = *prepared;
    std::filesystem::remove_all(where.path());
    test::RecordingStateFiles files;
    files.uid = ::geteuid();
    PortalCookieCache session_side(where, files);
    const std::string file = where.path() + "/gp-portal-vpn.example.com_4443";
    REQUIRE(session_side.save(portal(), cookie(2000)).ok());
    REQUIRE(files.of(Op::write).size() == 1);
    CHECK(files.of(Op::write)[0].path == file);
    auto got = session_side.load(portal(), 1999);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK((*got)->userauthcookie.reveal_text() == "c00k1e+/=");
    files.uid = ::geteuid() + 1;  // still only the owner's private file is trusted
    CHECK_FALSE(session_side.load(portal(), 1999).ok());
    files.uid = ::geteuid();
    auto one = portal();
    CHECK(*session_side.forget(&one) == 1);
    CHECK(files.files.empty());

    // Not prepared: the same location is an ordinary one (the directory is made again here).
    CookieCacheLocation plain = where;
    plain.prepared = false;
    test::RecordingStateFiles other;
    other.uid = ::geteuid();
    REQUIRE(PortalCookieCache(plain, other).save(portal(), cookie(2000)).ok());
    CHECK(std::filesystem::is_directory(plain.path()));
}
