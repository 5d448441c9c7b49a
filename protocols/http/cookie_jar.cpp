#include "protocols/http/cookie_jar.h"

#include <algorithm>
#include <array>

#include "protocols/http/message.h"
#include "protocols/http/secret_buffer.h"

namespace espvpn::http {

namespace {

bool is_date_delimiter(char c) {
    auto u = static_cast<unsigned char>(c);
    return u == 0x09 || (u >= 0x20 && u <= 0x2f) || (u >= 0x3b && u <= 0x40) || (u >= 0x5b && u <= 0x60) ||
           (u >= 0x7b && u <= 0x7e);
}

bool has_control(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return (u < 0x20 && u != '\t') || u == 0x7f;
    });
}

// Leading 1..max_digits digits not followed by another digit; -1 otherwise.
int leading_number(std::string_view token, std::size_t max_digits, std::size_t min_digits = 1) {
    std::size_t n = 0;
    while (n < token.size() && is_ascii_digit(token[n])) ++n;
    if (n < min_digits || n > max_digits) return -1;
    int value = 0;
    for (std::size_t i = 0; i < n; ++i) value = value * 10 + (token[i] - '0');
    return value;
}

bool parse_time(std::string_view token, int& h, int& m, int& s) {
    int* parts[3] = {&h, &m, &s};
    for (int i = 0; i < 3; ++i) {
        std::size_t n = 0;
        while (n < token.size() && is_ascii_digit(token[n])) ++n;
        if (n < 1 || n > 2) return false;
        *parts[i] = leading_number(token, 2);
        token.remove_prefix(n);
        if (i < 2) {
            if (token.empty() || token.front() != ':') return false;
            token.remove_prefix(1);
        }
    }
    return true;
}

bool is_ip_address(std::string_view host) {
    return host.find(':') != std::string_view::npos ||
           std::all_of(host.begin(), host.end(), [](char c) { return is_ascii_digit(c) || c == '.'; });
}

std::string default_path(std::string_view request_path) {
    request_path = request_path.substr(0, request_path.find('?'));
    if (request_path.empty() || request_path.front() != '/') return "/";
    auto last = request_path.rfind('/');
    if (last == 0) return "/";
    return std::string(request_path.substr(0, last));
}

bool expired(const Cookie& c, Clock::time_point now) { return c.expires && *c.expires <= now; }

}  // namespace

std::optional<Clock::time_point> parse_cookie_date(std::string_view text) {
    static constexpr std::array<std::string_view, 12> months = {"jan", "feb", "mar", "apr", "may", "jun",
                                                                "jul", "aug", "sep", "oct", "nov", "dec"};
    bool have_time = false, have_day = false, have_month = false, have_year = false;
    int hour = 0, minute = 0, second = 0, day = 0, month = 0, year = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_date_delimiter(text[i])) ++i;
        std::size_t start = i;
        while (i < text.size() && !is_date_delimiter(text[i])) ++i;
        auto token = text.substr(start, i - start);
        if (token.empty()) continue;
        int h, m, s;
        if (!have_time && parse_time(token, h, m, s)) {
            have_time = true;
            hour = h, minute = m, second = s;
        } else if (!have_day && leading_number(token, 2) >= 0) {
            have_day = true;
            day = leading_number(token, 2);
        } else if (!have_month && token.size() >= 3 &&
                   std::find(months.begin(), months.end(), ascii_lower(token.substr(0, 3))) != months.end()) {
            have_month = true;
            month = static_cast<int>(std::find(months.begin(), months.end(), ascii_lower(token.substr(0, 3))) -
                                     months.begin()) + 1;
        } else if (!have_year && leading_number(token, 4, 2) >= 0) {
            have_year = true;
            year = leading_number(token, 4, 2);
        }
    }
    if (!have_time || !have_day || !have_month || !have_year) return std::nullopt;
    if (year >= 70 && year <= 99) year += 1900;
    else if (year >= 0 && year <= 69) year += 2000;
    if (day < 1 || day > 31 || year < 1601 || hour > 23 || minute > 59 || second > 59) return std::nullopt;
    std::chrono::year_month_day ymd{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                                    std::chrono::day(static_cast<unsigned>(day))};
    if (!ymd.ok()) return std::nullopt;
    // Clock counts nanoseconds in 64 bits: years 1678..2262 only. Earlier dates are
    // in the past all the same and later ones are forever for a login (found by fuzzing).
    if (year < 1970) return Clock::time_point{};
    if (year > 2200) {
        ymd = std::chrono::year(2200) / std::chrono::January / 1;
        hour = minute = second = 0;
    }
    auto t = std::chrono::sys_days(ymd) + std::chrono::hours(hour) + std::chrono::minutes(minute) +
             std::chrono::seconds(second);
    return std::chrono::time_point_cast<Clock::duration>(t);
}

bool domain_matches(std::string_view host, std::string_view domain) {
    if (iequals(host, domain)) return true;
    if (is_ip_address(host) || host.size() <= domain.size() + 1) return false;
    return host[host.size() - domain.size() - 1] == '.' && iequals(host.substr(host.size() - domain.size()), domain);
}

bool path_matches(std::string_view request_path, std::string_view cookie_path) {
    request_path = request_path.substr(0, request_path.find('?'));
    if (request_path.empty()) request_path = "/";
    if (request_path == cookie_path) return true;
    if (request_path.substr(0, cookie_path.size()) != cookie_path) return false;
    return cookie_path.back() == '/' || request_path[cookie_path.size()] == '/';
}

Status CookieJar::store(std::string_view request_host, std::string_view request_path, const Secret& set_cookie,
                        Clock::time_point now) {
    std::string_view text = set_cookie.reveal_text();
    if (text.size() > kMaxCookieBytes)
        return make_error("Set-Cookie longer than " + std::to_string(kMaxCookieBytes) + " bytes");
    auto semi = text.find(';');
    auto pair = text.substr(0, semi);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos) return make_error("Set-Cookie without name=value");
    Cookie cookie;
    cookie.name = std::string(trim_blanks(pair.substr(0, eq)));
    auto value = trim_blanks(pair.substr(eq + 1));
    if (cookie.name.empty() || has_control(cookie.name) || cookie.name.find_first_of(" \t") != std::string::npos)
        return make_error("Set-Cookie with an invalid cookie name");
    if (has_control(value)) return make_error("Set-Cookie " + cookie.name + " has control characters in its value");
    cookie.value = Secret::from_string(value);
    cookie.domain = ascii_lower(request_host);
    cookie.path = default_path(request_path);

    bool have_max_age = false;
    auto attributes = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    while (!attributes.empty()) {
        auto next = attributes.find(';');
        auto attr = trim_blanks(attributes.substr(0, next));
        attributes = next == std::string_view::npos ? std::string_view() : attributes.substr(next + 1);
        auto aeq = attr.find('=');
        auto key = trim_blanks(attr.substr(0, aeq));
        auto val = aeq == std::string_view::npos ? std::string_view() : trim_blanks(attr.substr(aeq + 1));
        if (iequals(key, "Expires")) {
            if (auto when = parse_cookie_date(val); when && !have_max_age) cookie.expires = when;
        } else if (iequals(key, "Max-Age")) {
            bool negative = !val.empty() && val.front() == '-';
            auto digits = negative ? val.substr(1) : val;
            if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_ascii_digit)) continue;
            have_max_age = true;
            if (negative || digits.find_first_not_of('0') == std::string_view::npos) {
                cookie.expires = Clock::time_point::min();
            } else {
                // Ten years is forever for a login; avoids overflow on silly values.
                long long seconds = digits.size() > 9 ? 315360000LL : std::stoll(std::string(digits));
                cookie.expires = now + std::chrono::seconds(std::min(seconds, 315360000LL));
            }
        } else if (iequals(key, "Domain")) {
            if (!val.empty() && val.front() == '.') val.remove_prefix(1);
            if (val.empty()) continue;
            auto domain = ascii_lower(val);
            if (!domain_matches(request_host, domain))
                return make_error("Set-Cookie " + cookie.name + ": domain \"" + domain + "\" does not cover host \"" +
                                  std::string(request_host) + "\"");
            cookie.domain = domain;
            cookie.host_only = iequals(domain, request_host);
        } else if (iequals(key, "Path")) {
            cookie.path = (!val.empty() && val.front() == '/') ? std::string(val) : default_path(request_path);
        } else if (iequals(key, "Secure")) {
            cookie.secure = true;
        }
    }

    std::erase_if(cookies_, [&](const Cookie& c) { return expired(c, now); });
    auto same = std::find_if(cookies_.begin(), cookies_.end(), [&](const Cookie& c) {
        return c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path;
    });
    if (expired(cookie, now)) {
        if (same != cookies_.end()) cookies_.erase(same);
        return {};
    }
    if (same != cookies_.end()) {
        *same = std::move(cookie);  // keeps the original creation order
        return {};
    }
    if (cookies_.size() >= kMaxCookies)
        return make_error("more than " + std::to_string(kMaxCookies) + " cookies; refusing " + cookie.name);
    cookies_.push_back(std::move(cookie));
    return {};
}

void CookieJar::set(std::string_view host, std::string name, Secret value, std::string path) {
    Cookie cookie;
    cookie.name = std::move(name);
    cookie.value = std::move(value);
    cookie.domain = ascii_lower(host);
    cookie.path = std::move(path);
    std::erase_if(cookies_, [&](const Cookie& c) {
        return c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path;
    });
    cookies_.push_back(std::move(cookie));
}

Secret CookieJar::cookie_header(std::string_view host, std::string_view path, Clock::time_point now) const {
    std::vector<const Cookie*> matching;
    for (const auto& c : cookies_) {
        if (expired(c, now)) continue;
        bool host_ok = c.host_only ? iequals(host, c.domain) : domain_matches(host, c.domain);
        if (host_ok && path_matches(path, c.path)) matching.push_back(&c);
    }
    std::stable_sort(matching.begin(), matching.end(),
                     [](const Cookie* a, const Cookie* b) { return a->path.size() > b->path.size(); });
    SecretBuffer out;
    for (const auto* c : matching) {
        if (!out.empty()) out.append("; ");
        out.append(c->name);
        out.append("=");
        out.append(c->value);
    }
    return out.take_secret();
}

const Secret* CookieJar::find(std::string_view host, std::string_view name, Clock::time_point now) const {
    for (const auto& c : cookies_) {
        if (c.name != name || expired(c, now)) continue;
        if (c.host_only ? iequals(host, c.domain) : domain_matches(host, c.domain)) return &c.value;
    }
    return nullptr;
}

}  // namespace espvpn::http
