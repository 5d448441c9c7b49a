// The browser launcher (src/sso/browser_launcher.h): what it accepts, that it starts the
// configured program with the URL and nothing else, and that bytes sent straight to its
// socket (as a session taken over by a hostile server would) are checked there too.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "src/sso/browser_launcher.h"

using namespace espvpn;

namespace {

// Without opening one of its own (as a listing of /proc/self/fd would).
std::set<int> open_fds() {
    std::set<int> fds;
    for (int fd = 0; fd < 4096; ++fd)
        if (::fcntl(fd, F_GETFD) >= 0) fds.insert(fd);
    return fds;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Waits (event: the file appears with a line) up to 30 s: generous for a loaded machine.
std::string wait_for_line(const std::string& path) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
        const std::string s = read_file(path);
        if (s.find('\n') != std::string::npos) return s;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return read_file(path);
}

// A launcher whose "browser" appends its argument to OUT; its socket, found as the one
// descriptor start_browser_launcher added to this process.
struct Launcher {
    std::string dir;
    std::string out;
    int fd = -1;
    Launcher() {
        ::unsetenv("SUDO_UID");
        ::unsetenv("PKEXEC_UID");
        char tmpl[] = "/tmp/launcher-test-XXXXXX";
        dir = ::mkdtemp(tmpl);
        out = dir + "/out";
        const std::string prog = dir + "/browser";
        std::ofstream(prog) << "#!/bin/sh\nprintf '%s\\n' \"$1\" >>" << out << "\n";
        ::chmod(prog.c_str(), 0755);
        const auto before = open_fds();
        REQUIRE(sso::start_browser_launcher(prog, [] {}));
        for (int f : open_fds())
            if (!before.count(f)) fd = f;
        REQUIRE(sso::has_browser_launcher());
    }
    ~Launcher() {
        sso::stop_browser_launcher();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    // Sends raw bytes on the launcher's socket; its answer.
    std::string raw(const std::string& bytes) {
        REQUIRE(fd >= 0);
        REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
        char buf[4096];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    }
};

}  // namespace

TEST_CASE("browser launcher: the targets it accepts") {
    using sso::check_launch_target;
    CHECK(check_launch_target("https://idp.example.test/saml?SAMLRequest=fZJbT4MwFMe%2FS&RelayState=x"));
    CHECK(check_launch_target("HTTP://127.0.0.1:8080/"));
    CHECK(check_launch_target("/tmp/x/espvpn-sso-Ab12Cd/login.html"));
    CHECK(check_launch_target(std::string("https://a/") + std::string(sso::kMaxLaunchTarget - 10, 'a')));
    for (const std::string& bad :
         {std::string(), std::string("file:///etc/passwd"), std::string("javascript:alert(1)"),
          std::string("--new-window"), std::string("-h"), std::string("https://"), std::string("https:///etc/passwd"),
          std::string("http://?x"), std::string("ftp://host/"), std::string("https://a b/"),
          std::string("https://a/\x1b]0;title\x07"), std::string("https://a/\n--x"), std::string("https://a/\x7f"),
          std::string("https://a/\xc2\x9b" "2J"), std::string("https://\xc3\xa9.test/"), std::string("/etc/passwd"),
          std::string("/home/u/.local/share/applications/x.desktop"), std::string("/tmp/espvpn-sso-Ab12Cd/other.html"),
          std::string("/tmp/espvpn-sso-Ab12Cd/../espvpn-sso-Ab12Cd/login.html"),
          std::string("/tmp/espvpn-sso-Ab1/login.html"), std::string("tmp/espvpn-sso-Ab12Cd/login.html"),
          std::string("//espvpn-sso-Ab12Cd/login.html"),
          std::string("https://a/") + std::string(sso::kMaxLaunchTarget, 'a')}) {
        CAPTURE(bad);
        CHECK_FALSE(check_launch_target(bad));
    }
}

TEST_CASE("browser launcher: starts the program with the URL; refuses anything else, also sent to its socket directly") {
    Launcher l;
    const std::string url = "https://idp.example.test/sso?a=1&b=%20";
    REQUIRE(sso::launch_browser(url));
    CHECK(wait_for_line(l.out) == url + "\n");

    // Refused by the session's side before sending.
    auto refused = sso::launch_browser("file:///etc/passwd");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("not an http:// or https:// URL") != std::string::npos);

    // Straight to the socket: the launcher checks for itself, and starts nothing.
    for (const std::string& bad : {std::string("file:///etc/passwd"), std::string("/etc/passwd"),
                                  std::string("--help"), std::string("https://a/\x1b[2J"),
                                  std::string("/tmp/espvpn-sso-Ab12Cd/login.html")}) {
        CAPTURE(bad);
        const std::string answer = l.raw(bad);
        REQUIRE_FALSE(answer.empty());
        CHECK(answer[0] == 'n');
    }
    // The form page espvpn writes: a private directory and a regular file of this user.
    const std::string page_dir = l.dir + "/espvpn-sso-Ab12Cd";
    REQUIRE(::mkdir(page_dir.c_str(), 0700) == 0);
    std::ofstream(page_dir + "/login.html") << "<html></html>";
    REQUIRE(sso::launch_browser(page_dir + "/login.html"));
    // A symlink in its place (to any file) is refused.
    REQUIRE(::unlink((page_dir + "/login.html").c_str()) == 0);
    REQUIRE(::symlink("/etc/passwd", (page_dir + "/login.html").c_str()) == 0);
    CHECK_FALSE(sso::launch_browser(page_dir + "/login.html"));
    // A directory others may enter is refused too.
    REQUIRE(::unlink((page_dir + "/login.html").c_str()) == 0);
    std::ofstream(page_dir + "/login.html") << "<html></html>";
    REQUIRE(::chmod(page_dir.c_str(), 0755) == 0);
    CHECK_FALSE(sso::launch_browser(page_dir + "/login.html"));

    // The program ran exactly twice: the URL and the private form page.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::string lines;
    while (std::chrono::steady_clock::now() < until) {
        lines = read_file(l.out);
        if (lines.find("login.html\n") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(lines == url + "\n" + page_dir + "/login.html\n");
}

TEST_CASE("browser launcher: a message longer than it accepts ends it; then the session is told it has gone") {
    Launcher l;
    const std::string big(sso::kMaxLaunchTarget + 100, 'a');
    REQUIRE(::send(l.fd, big.data(), big.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(big.size()));
    char c;
    CHECK(::recv(l.fd, &c, 1, 0) == 0);  // EOF: the launcher has ended
    auto r = sso::launch_browser("https://idp.example.test/");
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("has gone") != std::string::npos);
}
