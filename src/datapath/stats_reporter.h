// StatsReporter: prints the datapath counters on SIGUSR1 and rewrites a JSON
// file periodically (--stats-json FILE), from its own thread.
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

namespace espvpn::datapath {

struct StatsReporterOptions {
    std::string json_path;                            // empty: no file
    // Writes the file when set (the session process of the privilege split asks the broker,
    // which may write where the session user may not); unset: io::replace_file here.
    std::function<Status(const std::string& path, std::span<const std::uint8_t> bytes)> write_file;
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

    // Writes the JSON file now (atomically: temp file + rename).
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
