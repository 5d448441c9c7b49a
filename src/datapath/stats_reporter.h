// StatsReporter: prints the datapath counters on SIGUSR1 and rewrites a JSON
// file periodically (--stats-json FILE) through io::StateFiles, from its own thread.
//
// The SIGUSR1 handler only writes to an eventfd (async-signal-safe); the
// reporter thread polls that eventfd and the JSON period. Stats come from a
// callback so the owner decides what to show (e.g. EspDatapath::stats()).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "protocols/base/result.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/pipeline_threads.h"
#include "src/io/state_files.h"

namespace espvpn::datapath {

struct StatsReporterOptions {
    std::string json_path;                            // empty: no file
    io::StateFiles* files = nullptr;                  // writes json_path (needed with it; outlives the reporter)
    std::chrono::milliseconds json_interval{1000};
    bool print_on_sigusr1 = true;                     // installs the SIGUSR1 handler
};

// What a reporter shows, for sessions whose counters are not DatapathStats
// (AnyConnect): the JSON object and the SIGUSR1 text.
struct StatsView {
    std::function<std::string()> json;
    std::function<std::string()> text;
};

class StatsReporter {
public:
    using Source = std::function<DatapathStats()>;
    static Result<std::unique_ptr<StatsReporter>> start(Source source, const StatsReporterOptions& options);
    static Result<std::unique_ptr<StatsReporter>> start(StatsView view, const StatsReporterOptions& options);
    ~StatsReporter();  // stops, writes the JSON file one last time
    StatsReporter(const StatsReporter&) = delete;
    StatsReporter& operator=(const StatsReporter&) = delete;

    // Writes the JSON file now (atomically: StateFiles' temp file + rename).
    Status write_json() const;
    // What SIGUSR1 prints (to the log at info level).
    void print() const;

private:
    StatsReporter(StatsView view, StatsReporterOptions options);
    void run();

    StatsView view_;
    StatsReporterOptions options_;
    ControlChannel stop_;
    std::thread thread_;
};

}  // namespace espvpn::datapath
