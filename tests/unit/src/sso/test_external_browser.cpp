// The external SsoBrowser's ends (src/sso/external_browser.h), each with a real program as
// the "browser": AnyConnect's localhost return (curl as the browser: a wrong path is answered
// 404 and the wait goes on, then /api/sso/<token>), the callback socket (a forged callback
// refused, the real one taken, a replay finding nobody waiting), and the --sso-timeout.
// Run as root without SUDO_UID/PKEXEC_UID: the program is started as root (explicit program).
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "src/sso/callback_socket.h"
#include "src/sso/external_browser.h"
#include "src/sso/invoking_user.h"

using namespace espvpn;

namespace {

std::uint16_t free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

struct NoInvoker {
    NoInvoker() {
        ::unsetenv("SUDO_UID");
        ::unsetenv("PKEXEC_UID");
    }
};

// The callback socket's directory: the user's /run/user/UID, or /run/espvpn-sso/UID made
// by root. The test's own directory goes afterwards (/run/espvpn-sso stays: another
// login may be about to use it).
struct SocketDir {
    std::string dir = sso::callback_socket_path(::getuid()).substr(0, sso::callback_socket_path(::getuid()).rfind('/'));
    bool existed = std::filesystem::exists(dir);
    bool usable() const { return existed || ::getuid() == 0; }
    ~SocketDir() {
        std::error_code ec;
        if (!existed) std::filesystem::remove(dir, ec);
    }
};

}  // namespace

TEST_CASE("external browser: the localhost return carries the AnyConnect token") {
    NoInvoker no_invoker;
    const auto port = free_port();
    char dir[] = "/tmp/espvpn-sso-test-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string script = std::string(dir) + "/browser";
    {
        std::ofstream f(script);
        // A stray request first (answered 404, the wait goes on), then the real return.
        f << "#!/bin/sh\ncurl -s -o /dev/null http://127.0.0.1:" << port << "/favicon.ico\n"
          << "curl -s -o " << dir << "/page \"$1\"\n";
    }
    ::chmod(script.c_str(), 0755);
    sso::ExternalBrowserOptions o;
    o.program = script;
    o.timeout = std::chrono::seconds(20);
    o.read_stdin = false;
    auto browser = sso::make_external_browser(o);
    CHECK(browser->sees_callbacks());
    CHECK_FALSE(browser->sees_responses());
    session::SsoStart start;
    start.url = "http://127.0.0.1:" + std::to_string(port) + "/api/sso/tok%2Dabc?x=1";
    session::SsoFinish finish;
    finish.loopback_port = port;
    auto r = browser->run(start, finish);
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
    CHECK(r->kind == session::SsoResult::Kind::token);
    CHECK(r->token.reveal_text() == "tok-abc");
    // curl got the page before the script ended; wait for the file (bounded).
    std::string page;
    for (int i = 0; i < 100 && page.find("close this window") == std::string::npos; ++i) {
        std::ifstream in(std::string(dir) + "/page");
        page.assign(std::istreambuf_iterator<char>(in), {});
        if (page.find("close this window") == std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(page.find("close this window") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("external browser: a forged callback is refused, the real one taken once") {
    NoInvoker no_invoker;
    SocketDir socket_dir;
    if (!socket_dir.usable()) {
        MESSAGE("skipped: no /run/user/UID and not root (no place for the callback socket)");
        return;
    }
    // "<!-- <saml-auth-status>1 ... prelogin-cookie>cookie-123456 -->" in base64.
    const std::string body =
        "<html><!-- <saml-auth-status>1</saml-auth-status><saml-username>alice</saml-username>"
        "<prelogin-cookie>cookie-123456</prelogin-cookie> --></html>";
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string enc;
    for (std::size_t i = 0; i < body.size(); i += 3) {
        unsigned v = static_cast<unsigned char>(body[i]) << 16;
        if (i + 1 < body.size()) v |= static_cast<unsigned char>(body[i + 1]) << 8;
        if (i + 2 < body.size()) v |= static_cast<unsigned char>(body[i + 2]);
        enc += b64[(v >> 18) & 63];
        enc += b64[(v >> 12) & 63];
        enc += i + 1 < body.size() ? b64[(v >> 6) & 63] : '=';
        enc += i + 2 < body.size() ? b64[v & 63] : '=';
    }
    const std::string good = "globalprotectcallback:" + enc;

    Status forged = make_error("not sent"), real = make_error("not sent");
    std::thread handler([&] {
        // The login's socket appears when run() starts; bounded retries until then.
        for (int i = 0; i < 200; ++i) {
            forged = sso::send_callback("globalprotectcallback:!!not-base64!!");
            if (forged || forged.error().message.find("no espvpn login is waiting") == std::string::npos) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        real = sso::send_callback(good);
    });
    sso::ExternalBrowserOptions o;
    o.program = "true";
    o.timeout = std::chrono::seconds(20);
    o.read_stdin = false;
    session::SsoStart start;
    start.url = "https://idp.invalid/sso";
    session::SsoFinish finish;
    finish.gp_acs = true;
    auto r = sso::make_external_browser(o)->run(start, finish);
    handler.join();
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
    REQUIRE_FALSE(forged);
    CHECK(forged.error().message.find("refused") != std::string::npos);
    CHECK_MESSAGE(real, (real ? "" : real.error().message));
    CHECK(r->kind == session::SsoResult::Kind::callback_url);
    CHECK(r->url.reveal_text() == good);
    auto replay = sso::send_callback(good);
    REQUIRE_FALSE(replay);
    CHECK(replay.error().message.find("no espvpn login is waiting") != std::string::npos);
}

TEST_CASE("external browser: nobody finishes: the --sso-timeout error") {
    NoInvoker no_invoker;
    SocketDir socket_dir;
    if (!socket_dir.usable()) {
        MESSAGE("skipped: no /run/user/UID and not root (no place for the callback socket)");
        return;
    }
    sso::ExternalBrowserOptions o;
    o.program = "true";
    o.timeout = std::chrono::seconds(1);
    o.read_stdin = false;
    session::SsoStart start;
    start.html = "<html><body>form</body></html>";  // a GP POST form: saved to a file, then removed
    start.server = "vpn.example (portal)";
    session::SsoFinish finish;
    finish.gp_acs = true;
    auto r = sso::make_external_browser(o)->run(start, finish);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "single sign-on at vpn.example (portal) not finished within 1 s (--sso-timeout)");
    // Nothing waits any more.
    auto late = sso::send_callback("globalprotectcallback:x");
    REQUIRE_FALSE(late);
    CHECK(late.error().message.find("no espvpn login is waiting") != std::string::npos);
}

TEST_CASE("external browser: a finish it cannot see is an error, not a wait") {
    session::SsoFinish finish;
    finish.final_url = "https://vpn.example/done";
    finish.token_cookie = "acSamlv2Token";
    session::SsoStart start;
    start.url = "https://idp.invalid/";
    auto r = sso::make_external_browser({})->run(start, finish);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("--sso-browser") != std::string::npos);
}

TEST_CASE("invoking user: an unreadable SUDO_UID/PKEXEC_UID is an error, never root on the invoker's behalf") {
    if (::getuid() != 0) return;  // only root looks at who invoked it
    NoInvoker no_invoker;
    auto alone = sso::invoking_user();
    REQUIRE(alone);
    CHECK(alone->is_root_alone);
    CHECK_FALSE(sso::user_switch(*alone).needed);
    for (const char* name : {"SUDO_UID", "PKEXEC_UID"}) {
        ::setenv(name, "12ab", 1);
        auto u = sso::invoking_user();
        ::unsetenv(name);
        REQUIRE_FALSE(u);
        CHECK(u.error().message.find(name) != std::string::npos);
    }
    ::setenv("SUDO_UID", "0", 1);
    auto root = sso::invoking_user();
    ::unsetenv("SUDO_UID");
    REQUIRE(root);
    CHECK_FALSE(root->is_root_alone);
}

TEST_CASE("invoking user: remove_dir_as_user removes the directory and what is in it") {
    NoInvoker no_invoker;
    auto user = sso::invoking_user();
    REQUIRE(user);
    char dir[] = "/tmp/espvpn-sso-test-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    std::filesystem::create_directories(std::string(dir) + "/a/b");
    std::ofstream(std::string(dir) + "/a/b/f") << "x";
    std::filesystem::create_symlink("/etc", std::string(dir) + "/link");
    CHECK(sso::remove_dir_as_user(*user, dir));
    CHECK_FALSE(std::filesystem::exists(dir));
    CHECK(std::filesystem::exists("/etc/passwd"));
}

// Issue 41: another local user must neither take the AnyConnect token by holding the port on
// one loopback address, nor hand espvpn a token of theirs (login CSRF).
TEST_CASE("external browser: the localhost port held by another user: a clear error naming them, no login") {
    NoInvoker no_invoker;
    if (::geteuid() != 0) {
        MESSAGE("skipped: needs root (the holder runs as nobody)");
        return;
    }
    const auto port = free_port();
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    pid_t holder = ::fork();
    REQUIRE(holder >= 0);
    if (holder == 0) {
        // nobody holds 127.0.0.1:PORT only (::1 stays free, as an attacker would leave it).
        ::close(ready[0]);
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(1);
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0) ::_exit(1);
        (void)!::write(ready[1], "1", 1);
        ::sleep(60);  // bounded; killed by the test long before
        ::_exit(0);
    }
    ::close(ready[1]);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);
    ::close(ready[0]);
    sso::ExternalBrowserOptions o;
    o.program = "true";
    o.timeout = std::chrono::seconds(3);
    o.read_stdin = false;
    session::SsoStart start;
    start.url = "https://idp.invalid/sso";
    session::SsoFinish finish;
    finish.loopback_port = port;
    auto r = sso::make_external_browser(o)->run(start, finish);
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
    REQUIRE_FALSE(r);
    CHECK_MESSAGE(r.error().message.find("127.0.0.1 port " + std::to_string(port)) != std::string::npos,
                  r.error().message);
    CHECK_MESSAGE(r.error().message.find("held by uid 65534") != std::string::npos, r.error().message);
    CHECK_MESSAGE(r.error().message.find("pid " + std::to_string(holder)) != std::string::npos, r.error().message);
}

TEST_CASE("external browser: a token from another user's connection is refused, the user's own taken") {
    NoInvoker no_invoker;
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) {
        MESSAGE("skipped: needs root and setpriv (the injected request comes from nobody)");
        return;
    }
    const auto port = free_port();
    char dir[] = "/tmp/espvpn-sso-peer-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    ::chmod(dir, 0777);
    const std::string script = std::string(dir) + "/browser";
    {
        // First nobody's request with a token of theirs (refused: 403), then the real return.
        std::ofstream f(script);
        f << "#!/bin/sh\nsetpriv --reuid=65534 --regid=65534 --clear-groups curl -s -o /dev/null -w '%{http_code}' "
          << "http://127.0.0.1:" << port << "/api/sso/attacker-token > " << dir << "/injected\n"
          << "setpriv --reuid=65534 --regid=65534 --clear-groups curl -s -o /dev/null -w '%{http_code}' "
          << "'http://[::1]:" << port << "/api/sso/attacker-token' > " << dir << "/injected6\n"
          << "curl -s -o /dev/null \"$1\"\n";
    }
    ::chmod(script.c_str(), 0755);
    sso::ExternalBrowserOptions o;
    o.program = script;
    o.timeout = std::chrono::seconds(20);
    o.read_stdin = false;
    session::SsoStart start;
    start.url = "http://127.0.0.1:" + std::to_string(port) + "/api/sso/real-token";
    session::SsoFinish finish;
    finish.loopback_port = port;
    auto r = sso::make_external_browser(o)->run(start, finish);
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
    CHECK(r->token.reveal_text() == "real-token");
    std::string code;
    std::ifstream(std::string(dir) + "/injected") >> code;
    CHECK(code == "403");
    std::string code6;
    std::ifstream(std::string(dir) + "/injected6") >> code6;
    CHECK((code6 == "403" || code6 == "000"));  // 000: no IPv6 on this host's loopback
    std::filesystem::remove_all(dir);
}
