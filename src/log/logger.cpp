#include "src/log/logger.h"

#include "protocols/base/ascii.h"

#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <mutex>

namespace espvpn::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::mutex g_mutex;  // guards g_config and g_sink; never held while writing
Config g_config;
Sink g_sink;

int syslog_priority(Level level) {
    switch (level) {
        case Level::error: return LOG_ERR;
        case Level::warn: return LOG_WARNING;
        case Level::info: return LOG_INFO;
        default: return LOG_DEBUG;
    }
}

std::string timestamp() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    localtime_r(&ts.tv_sec, &t);
    char buf[48];
    std::size_t n = strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &t);
    snprintf(buf + n, sizeof buf - n, ".%03ld ", ts.tv_nsec / 1000000);
    return buf;
}

}  // namespace

void configure(const Config& config) {
    std::lock_guard lock(g_mutex);
    if (g_config.syslog) closelog();
    g_config = config;
    // LOG_NDELAY: connected now, not at the first line, which may come from a packet thread
    // whose seccomp filter refuses socket/connect (src/sandbox).
    if (g_config.syslog) openlog(g_config.ident.c_str(), LOG_PID | LOG_NDELAY, LOG_DAEMON);
    g_level.store(static_cast<int>(config.level), std::memory_order_relaxed);
}

Config current() {
    std::lock_guard lock(g_mutex);
    return g_config;
}

bool enabled(Level level) {
    return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

std::string_view level_name(Level level) {
    switch (level) {
        case Level::error: return "error";
        case Level::warn: return "warn";
        case Level::info: return "info";
        case Level::debug: return "debug";
        case Level::trace: return "trace";
    }
    return "?";
}

std::optional<Level> parse_level(std::string_view name) {
    for (Level l : {Level::error, Level::warn, Level::info, Level::debug, Level::trace})
        if (level_name(l) == name) return l;
    return std::nullopt;
}

void set_test_sink(Sink sink) {
    std::lock_guard lock(g_mutex);
    g_sink = std::move(sink);
}

Line::~Line() {
    // Lines carry server text (messages, banners, names): its control characters are
    // escaped here, the one place every line passes, so none reaches a terminal or syslog.
    std::string message = printable(os_.str());
    bool use_syslog, stamps;
    Sink sink;
    {
        std::lock_guard lock(g_mutex);
        use_syslog = g_config.syslog;
        stamps = g_config.timestamps;
        sink = g_sink;
    }
    if (sink) sink(level_, message);
    if (use_syslog) {
        syslog(syslog_priority(level_), "%s", message.c_str());
        return;
    }
    std::string line;
    if (stamps) line += timestamp();
    if (level_ == Level::error) line += "error: ";
    else if (level_ == Level::warn) line += "warning: ";
    line += message;
    line += '\n';
    // One write so concurrent lines stay whole; a short write to a pipe is retried.
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

}  // namespace espvpn::log
