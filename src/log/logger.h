// Logging with levels, optional timestamps, to stderr or syslog.
//
//   LOG_INFO << "connected to " << host;
//
// A line is formatted only when its level is enabled, and written with one
// write(2)/syslog(3) call so lines from several threads never interleave.
// Secrets stream as "<redacted>" (see crypto/secret.h).
#pragma once

#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace espvpn::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

struct Config {
    Level level = Level::info;
    bool timestamps = false;
    bool syslog = false;
    std::string ident = "espvpn";
};

void configure(const Config& config);
Config current();
bool enabled(Level level);
std::string_view level_name(Level level);
std::optional<Level> parse_level(std::string_view name);

// Tests capture every formatted line here (in addition to the normal output).
using Sink = std::function<void(Level, std::string_view)>;
void set_test_sink(Sink sink);

class Line {
public:
    explicit Line(Level level) : level_(level) {}
    Line(const Line&) = delete;
    Line& operator=(const Line&) = delete;
    ~Line();

    template <class T>
    Line& operator<<(const T& value) {
        os_ << value;
        return *this;
    }

private:
    Level level_;
    std::ostringstream os_;
};

}  // namespace espvpn::log

// A for-statement rather than if/else, so the macro nests safely inside
// unbraced if/else chains.
#define ESPVPN_LOG(lvl)                                                              \
    for (bool espvpn_log_once_ = ::espvpn::log::enabled(::espvpn::log::Level::lvl); \
         espvpn_log_once_; espvpn_log_once_ = false)                                \
    ::espvpn::log::Line(::espvpn::log::Level::lvl)

#define LOG_ERROR ESPVPN_LOG(error)
#define LOG_WARN ESPVPN_LOG(warn)
#define LOG_INFO ESPVPN_LOG(info)
#define LOG_DEBUG ESPVPN_LOG(debug)
#define LOG_TRACE ESPVPN_LOG(trace)
