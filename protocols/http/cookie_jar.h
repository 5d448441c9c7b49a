// HTTP cookies (RFC 6265) for a login: Set-Cookie lines in, a Cookie header out.
// Values are session credentials (GlobalProtect's PHPSESSID, AnyConnect's
// webvpn), so they are kept and produced as Secrets and never printed.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::http {

using Clock = std::chrono::system_clock;

// The date formats RFC 6265 5.1.1 accepts (IMF-fixdate, RFC 850, asctime and the
// sloppy variants servers send). nullopt when no valid date is found.
std::optional<Clock::time_point> parse_cookie_date(std::string_view text);

struct Cookie {
    std::string name;
    Secret value;
    std::string domain;      // lowercase, no leading dot
    bool host_only = true;   // no Domain attribute: only this exact host
    std::string path = "/";
    bool secure = false;
    std::optional<Clock::time_point> expires;  // nullopt: session cookie
};

class CookieJar {
public:
    static constexpr std::size_t kMaxCookies = 64;
    static constexpr std::size_t kMaxCookieBytes = 8192;

    // Stores one Set-Cookie value received from request_host for request_path.
    // A Domain that does not cover the host, or a malformed line, is an error and
    // nothing is stored; an expiry in the past deletes the cookie.
    Status store(std::string_view request_host, std::string_view request_path, const Secret& set_cookie,
                 Clock::time_point now = Clock::now());

    // Sets a cookie directly (e.g. a session cookie given on the command line).
    void set(std::string_view host, std::string name, Secret value, std::string path = "/");

    // "a=1; b=2" for a request over TLS to host/path: longer paths first, then
    // older cookies first (RFC 6265 5.4). Empty when nothing matches.
    Secret cookie_header(std::string_view host, std::string_view path, Clock::time_point now = Clock::now()) const;

    // The value of a cookie that would be sent to host (any path), or nullptr.
    const Secret* find(std::string_view host, std::string_view name, Clock::time_point now = Clock::now()) const;

    std::size_t size() const { return cookies_.size(); }
    void clear() { cookies_.clear(); }

private:
    std::vector<Cookie> cookies_;  // in creation order
};

bool domain_matches(std::string_view host, std::string_view domain);
bool path_matches(std::string_view request_path, std::string_view cookie_path);

}  // namespace espvpn::http
