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
