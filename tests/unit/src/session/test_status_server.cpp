// The status server against real AF_UNIX clients: answers, bounds, the peer check.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "src/io/status_socket.h"
#include "src/session/status_server.h"

using namespace espvpn;
using namespace std::chrono_literals;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/status-test.XXXXXX";
        REQUIRE(::mkdtemp(t));
        path = t;
    }
    ~TempDir() {
        ::unlink((path + "/s.sock").c_str());
        ::unlink((path + "/f").c_str());
        ::rmdir(path.c_str());
    }
};

// Reads one line (5 s at most); "" on EOF or error.
std::string read_line(int fd) {
    std::string in;
    char c;
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < end) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const ssize_t n = ::recv(fd, &c, 1, 0);
        if (n <= 0) return in;
        if (c == '\n') return in;
        in += c;
    }
    return in;
}

void send_all(int fd, const std::string& s) { REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size())); }

}  // namespace

TEST_CASE("open_status_listener: owner-only directory, stale socket replaced, live one and other files kept") {
    TempDir dir;
    const std::string path = dir.path + "/s.sock";
    ::chmod(dir.path.c_str(), 0700);
    {
        auto fd = io::open_status_listener(path, {0600});
        REQUIRE(fd);
        struct stat st{};
        REQUIRE(::lstat(path.c_str(), &st) == 0);
        CHECK(S_ISSOCK(st.st_mode));
        CHECK((st.st_mode & 0777) == 0600);
        auto again = io::open_status_listener(path, {0600});  // the first one still listens
        REQUIRE(!again);
        CHECK(again.error().message.find("another process serves") != std::string::npos);
    }
    // Closed: a stale socket of ours, replaced.
    CHECK(io::open_status_listener(path, {0666}));
    ::unlink(path.c_str());
    // A symlink or a file at the path is not replaced.
    REQUIRE(::symlink((dir.path + "/f").c_str(), path.c_str()) == 0);
    auto link = io::open_status_listener(path, {0600});
    REQUIRE(!link);
    CHECK(link.error().message.find("not a socket of ours") != std::string::npos);
    ::unlink(path.c_str());
    // A directory others may write is refused.
    ::chmod(dir.path.c_str(), 0777);
    auto open_dir = io::open_status_listener(path, {0600});
    REQUIRE(!open_dir);
    CHECK(open_dir.error().message.find("may be written by others") != std::string::npos);
    ::chmod(dir.path.c_str(), 0700);
    CHECK(!io::open_status_listener("relative.sock", {0600}));
}

TEST_CASE("status_allowed: root, the session's user, listed users and groups (primary or supplementary)") {
    session::StatusAccess a;
    a.users = {1001};
    a.groups = {2000};
    io::PeerCredentials p;
    p.uid = 0;
    CHECK(session::status_allowed(a, p, 1000));
    p.uid = 1000;
    CHECK(session::status_allowed(a, p, 1000));
    p.uid = 1001;
    CHECK(session::status_allowed(a, p, 1000));
    p.uid = 1002;
    p.gid = 1002;
    CHECK(!session::status_allowed(a, p, 1000));
    p.groups = {5, 2000};
    CHECK(session::status_allowed(a, p, 1000));
    p.groups = {};
    p.gid = 2000;
    CHECK(session::status_allowed(a, p, 1000));
}

TEST_CASE("status server: answers, queues commands, refuses long lines, drops a client that never reads") {
    TempDir dir;
    ::chmod(dir.path.c_str(), 0700);
    const std::string path = dir.path + "/s.sock";
    auto fd = io::open_status_listener(path, {0600});
    REQUIRE(fd);
    status::Snapshot initial;
    initial.protocol = "gp";
    session::StatusBoard board(initial);
    board.set_state(status::State::connected);
    auto server = session::StatusServer::start(std::move(*fd), {}, board);
    REQUIRE(server);

    auto c = io::connect_status_socket(path);
    REQUIRE(c);
    send_all(c->get(), "{\"request\": \"status\"}\n{\"request\": \"disconnect\"}\nnonsense\n");
    auto r = status::parse_reply(read_line(c->get()));
    REQUIRE(r);
    REQUIRE(r->status);
    CHECK(r->status->state == status::State::connected);
    CHECK(read_line(c->get()).find("disconnecting") != std::string::npos);
    CHECK(read_line(c->get()).find("not a JSON object") != std::string::npos);
    pollfd p{(*server)->commands_fd(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    auto cmds = (*server)->take_commands();
    REQUIRE(cmds.size() == 1);
    CHECK(cmds[0] == status::Request::disconnect);

    // 64 KiB without a newline: refused, closed.
    auto longc = io::connect_status_socket(path);
    REQUIRE(longc);
    const std::string junk(64 * 1024, 'x');
    [[maybe_unused]] auto n = ::send(longc->get(), junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    CHECK(read_line(longc->get()).find("request line too long") != std::string::npos);
    CHECK(read_line(longc->get()).empty());  // then EOF

    // Requests without reading the replies: dropped once kMaxPending bytes wait.
    auto noread = io::connect_status_socket(path);
    REQUIRE(noread);
    const std::string req = "{\"request\": \"status\"}\n";
    bool dropped = false;
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!dropped && std::chrono::steady_clock::now() < end) {
        if (::send(noread->get(), req.data(), req.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
            if (errno == EPIPE || errno == ECONNRESET) dropped = true;
            else std::this_thread::sleep_for(1ms);
        }
    }
    CHECK(dropped);
    CHECK((*server)->counters().unread == 1);
    // The server still answers others.
    auto after = io::connect_status_socket(path);
    REQUIRE(after);
    send_all(after->get(), req);
    CHECK(read_line(after->get()).find("\"state\":\"connected\"") != std::string::npos);
}
