// Runs the user's vpnc-script (`/bin/sh -c <command>`) off the packet path.
//
// Scripts run one after another on the runner's own thread, in the order they
// were queued, so a tunnel's pre-init → connect → ... → disconnect order holds.
// run() never blocks: the control plane waits on the returned future only where
// the contract needs it (pre-init before the tun opens, connect before "up",
// disconnect before exit); the data path never waits at all.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "src/host/script_env.h"

namespace espvpn::host {

struct ScriptResult {
    bool started = false;      // false: the shell could not be spawned (see error)
    int exit_status = -1;      // when it exited normally
    int signal = 0;            // when it was killed by a signal
    bool timed_out = false;    // killed by us after the timeout
    std::string error;         // why it did not start
    std::string stderr_text;   // what the script wrote to stderr (last 4 KiB)
    std::chrono::milliseconds duration{0};
    bool ok() const { return started && exit_status == 0; }
};

class ScriptRunner {
public:
    // timeout 0: wait for the script however long it takes (openconnect's way).
    explicit ScriptRunner(std::string command,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{0});
    ScriptRunner(const ScriptRunner&) = delete;
    ScriptRunner& operator=(const ScriptRunner&) = delete;
    // Runs what is still queued, then stops.
    ~ScriptRunner();

    std::shared_future<ScriptResult> run(ScriptEnv env);

    const std::string& command() const { return command_; }

private:
    struct Job {
        ScriptEnv env;
        std::promise<ScriptResult> done;
    };
    void worker();
    ScriptResult execute(const ScriptEnv& env);

    std::string command_;
    std::chrono::milliseconds timeout_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> queue_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace espvpn::host
