#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "src/host/script_runner.h"

using namespace espvpn;
using namespace espvpn::host;
namespace fs = std::filesystem;

namespace {
struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/espvpn-hooks-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

ScriptEnv env_for(ScriptReason reason) {
    TunnelConfig c;
    c.ip4_address = "10.0.0.2";
    c.split_include = {*IpPrefix::parse("10.1.0.0/16")};
    return build_script_env(c, {reason, "tun9", 77, 1});
}
}  // namespace

TEST_CASE("the script sees the contract variables, and stale inherited ones are gone") {
    TempDir dir;
    setenv("CISCO_SPLIT_EXC", "99", 1);      // stale: must not reach the script
    setenv("ESPVPN_TEST_KEEP", "kept", 1);   // unrelated: inherited as openconnect does
    ScriptRunner runner("env > '" + (dir.path / "env").string() + "'");
    ScriptResult r = runner.run(env_for(ScriptReason::connect)).get();
    unsetenv("CISCO_SPLIT_EXC");
    unsetenv("ESPVPN_TEST_KEEP");
    CHECK(r.ok());
    std::string env = slurp(dir.path / "env");
    CHECK(env.find("reason=connect\n") != std::string::npos);
    CHECK(env.find("TUNDEV=tun9\n") != std::string::npos);
    CHECK(env.find("VPNPID=77\n") != std::string::npos);
    CHECK(env.find("CISCO_SPLIT_INC_0_ADDR=10.1.0.0\n") != std::string::npos);
    CHECK(env.find("ESPVPN_TEST_KEEP=kept\n") != std::string::npos);
    CHECK(env.find("CISCO_SPLIT_EXC=") == std::string::npos);
}

TEST_CASE("run() returns before the script finishes, and scripts run in order") {
    TempDir dir;
    fs::path gate = dir.path / "gate", log = dir.path / "log";
    // The first script waits (bounded: 10 s) for a file this thread creates only
    // after run() has returned: if run() blocked, the test would time out.
    std::string cmd = "i=0; while [ ! -e '" + gate.string() + "' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
                      "echo \"$reason\" >> '" + log.string() + "'";
    ScriptRunner runner(cmd);
    auto first = runner.run(env_for(ScriptReason::pre_init));
    auto second = runner.run(env_for(ScriptReason::connect));
    CHECK(first.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
    std::ofstream(gate).put('x');
    CHECK(first.get().ok());
    CHECK(second.get().ok());
    CHECK(slurp(log) == "pre-init\nconnect\n");
}

TEST_CASE("a failing script is reported with its status and stderr, and does not throw") {
    ScriptRunner runner("echo 'route add failed' >&2; exit 3");
    ScriptResult r = runner.run(env_for(ScriptReason::connect)).get();
    CHECK(r.started);
    CHECK_FALSE(r.ok());
    CHECK(r.exit_status == 3);
    CHECK(r.stderr_text == "route add failed");
}

TEST_CASE("a script that hangs is killed at the timeout, with whatever it started") {
    ScriptRunner runner("sleep 30 >/dev/null & sleep 30", std::chrono::milliseconds(300));
    auto t0 = std::chrono::steady_clock::now();
    ScriptResult r = runner.run(env_for(ScriptReason::disconnect)).get();
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(r.timed_out);
    CHECK(r.signal == SIGKILL);
    CHECK(took < std::chrono::seconds(10));  // generous: behaviour, not speed
}

TEST_CASE("a daemon that keeps stderr open does not hold the runner") {
    // The shell exits at once; its background child keeps the stderr pipe open.
    TempDir dir;
    fs::path pidfile = dir.path / "pid";
    ScriptRunner runner("sleep 30 >/dev/null & echo $! > '" + pidfile.string() + "'; exit 0");
    auto t0 = std::chrono::steady_clock::now();
    ScriptResult r = runner.run(env_for(ScriptReason::connect)).get();
    CHECK(r.ok());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    pid_t daemon = std::atoi(slurp(pidfile).c_str());
    REQUIRE(daemon > 0);
    kill(daemon, SIGKILL);
}

TEST_CASE("queued scripts still run when the runner is destroyed") {
    TempDir dir;
    fs::path out = dir.path / "out";
    {
        ScriptRunner runner("echo \"$reason\" >> '" + out.string() + "'");
        (void)runner.run(env_for(ScriptReason::disconnect));
    }
    CHECK(slurp(out) == "disconnect\n");
}
