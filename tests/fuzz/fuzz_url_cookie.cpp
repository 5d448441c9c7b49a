// libFuzzer target: URL parsing and Location resolution, and the cookie jar
// (Set-Cookie lines, cookie dates, then building a Cookie header). The input is
// split at the first newline: before it a URL/Location, after it Set-Cookie lines.
#include "protocols/http/cookie_jar.h"
#include "protocols/http/url.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text = fuzz::as_text(data, size);
    std::string_view first = text.substr(0, text.find('\n'));
    std::string_view rest = first.size() < text.size() ? text.substr(first.size() + 1) : std::string_view{};

    if (auto u = http::parse_url(first); u) (void)u->to_string();
    auto base = http::parse_url("https://vpn.example.com/global-protect/prelogin.esp");
    if (auto r = http::resolve_location(*base, first); r) (void)r->to_string();
    (void)http::parse_cookie_date(first);

    http::CookieJar jar;
    const auto now = http::Clock::time_point{} + std::chrono::hours(24 * 365 * 50);
    while (!rest.empty()) {
        std::string_view line = rest.substr(0, rest.find('\n'));
        rest = line.size() < rest.size() ? rest.substr(line.size() + 1) : std::string_view{};
        (void)jar.store("vpn.example.com", "/global-protect/", Secret::from_string(line), now);
    }
    (void)jar.cookie_header("vpn.example.com", "/global-protect/getconfig.esp", now);
    (void)jar.find("vpn.example.com", "PHPSESSID", now);
    return 0;
}
