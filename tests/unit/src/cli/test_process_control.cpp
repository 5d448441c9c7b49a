#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <string>

#include "src/cli/process_control.h"

using namespace espvpn::cli;

TEST_CASE("--setuid: a user by name or uid; an unknown one is a clear error") {
    auto by_name = RunAsUser::lookup("nobody");
    REQUIRE(by_name);
    CHECK(by_name->uid == 65534);
    auto by_uid = RunAsUser::lookup("65534");
    REQUIRE(by_uid);
    CHECK(by_uid->name == "nobody");
    auto bad = RunAsUser::lookup("no-such-espvpn-user");
    REQUIRE(!bad);
    CHECK(bad.error().message.find("no-such-espvpn-user") != std::string::npos);
}

TEST_CASE("--pid-file without -b holds our PID and is removed at the end") {
    std::string path = "/tmp/espvpn-pid-" + std::to_string(getpid());
    ClientOptions o;
    o.pid_file = path;
    {
        auto pc = ProcessControl::prepare(o);
        REQUIRE(pc);
        std::ifstream in(path);
        int pid = 0;
        in >> pid;
        CHECK(pid == getpid());
        CHECK(pc->drop_privileges().ok());  // no --setuid: nothing to do
        pc->tunnel_up();                     // no -b: nothing to release
    }
    CHECK(access(path.c_str(), F_OK) != 0);
}

TEST_CASE("--pid-file in a missing directory is a clear error") {
    ClientOptions o;
    o.pid_file = "/nonexistent/espvpn/pid";
    auto pc = ProcessControl::prepare(o);
    REQUIRE(!pc);
    CHECK(pc.error().message.find("/nonexistent/espvpn/pid") != std::string::npos);
}

// Issue 41: the pid file's name in a directory someone else can write.
TEST_CASE("--pid-file: a symlink planted at the name is refused, never written through") {
    char dir[] = "/tmp/espvpn-pid-test-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string target = std::string(dir) + "/victim";
    { std::ofstream(target) << "precious\n"; }
    const std::string path = std::string(dir) + "/espvpn.pid";
    REQUIRE(symlink(target.c_str(), path.c_str()) == 0);
    ClientOptions o;
    o.pid_file = path;
    {
        auto pc = ProcessControl::prepare(o);
        REQUIRE(!pc);
        CHECK(pc.error().message.find("symlink is already there") != std::string::npos);
        CHECK(pc.error().message.find(path) != std::string::npos);
    }
    std::ifstream in(target);
    std::string text;
    std::getline(in, text);
    CHECK(text == "precious");
    unlink(path.c_str());
    unlink(target.c_str());
    rmdir(dir);
}

TEST_CASE("--pid-file: a stale pid file (a regular file) is replaced") {
    std::string path = "/tmp/espvpn-pid-stale-" + std::to_string(getpid());
    { std::ofstream(path) << "1\n"; }
    ClientOptions o;
    o.pid_file = path;
    {
        auto pc = ProcessControl::prepare(o);
        REQUIRE(pc);
        std::ifstream in(path);
        int pid = 0;
        in >> pid;
        CHECK(pid == getpid());
    }
    CHECK(access(path.c_str(), F_OK) != 0);
}
