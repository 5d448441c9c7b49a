#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "crypto/secret.h"
#include "src/log/logger.h"

using namespace espvpn;

namespace {
struct Capture {
    std::vector<std::pair<log::Level, std::string>> lines;
    Capture(log::Level level) {
        log::Config c;
        c.level = level;
        log::configure(c);
        log::set_test_sink([this](log::Level l, std::string_view m) { lines.emplace_back(l, m); });
    }
    ~Capture() {
        log::set_test_sink(nullptr);
        log::configure(log::Config{});
    }
};
}  // namespace

TEST_CASE("levels filter lines and skip formatting when disabled") {
    Capture cap(log::Level::info);
    int evaluated = 0;
    auto count = [&] { return ++evaluated; };
    LOG_INFO << "shown " << 1;
    LOG_DEBUG << "hidden " << count();
    LOG_ERROR << "bad";
    REQUIRE(cap.lines.size() == 2);
    CHECK(cap.lines[0].second == "shown 1");
    CHECK(cap.lines[1].first == log::Level::error);
    CHECK(evaluated == 0);
}

TEST_CASE("secrets in log lines print as <redacted>") {
    Capture cap(log::Level::trace);
    Secret cookie = Secret::from_string("authcookie=0123456789abcdef");
    LOG_TRACE << "cookie: " << cookie;
    REQUIRE(cap.lines.size() == 1);
    CHECK(cap.lines[0].second == "cookie: <redacted>");
}

TEST_CASE("level names parse both ways") {
    for (auto l : {log::Level::error, log::Level::warn, log::Level::info, log::Level::debug,
                   log::Level::trace}) {
        auto back = log::parse_level(log::level_name(l));
        REQUIRE(back.has_value());
        CHECK(*back == l);
    }
    CHECK_FALSE(log::parse_level("loud").has_value());
}
