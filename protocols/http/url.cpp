#include "protocols/http/url.h"

#include <algorithm>
#include <vector>

#include "protocols/base/ascii.h"

namespace espvpn::http {

namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// RFC 3986 5.2.4, on a path that starts with '/'.
std::string remove_dot_segments(std::string_view path) {
    std::vector<std::string_view> out;
    bool trailing_slash = false;
    std::size_t i = 1;
    while (i <= path.size()) {
        auto slash = path.find('/', i);
        auto seg = path.substr(i, slash == std::string_view::npos ? std::string_view::npos : slash - i);
        trailing_slash = false;
        if (seg == "..") {
            if (!out.empty()) out.pop_back();
            trailing_slash = true;
        } else if (seg == ".") {
            trailing_slash = true;
        } else {
            out.push_back(seg);
        }
        if (slash == std::string_view::npos) break;
        i = slash + 1;
    }
    std::string result;
    for (auto seg : out) {
        result += '/';
        result += seg;
    }
    if (result.empty() || trailing_slash) result += '/';
    return result;
}

// Hex digits, ':' and a dotted IPv4 tail; the socket layer rejects what is still no address.
bool ipv6_literal_chars(std::string_view host) {
    return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
        return is_ascii_digit(c) || (c >= 'a' && c <= 'f') || c == ':' || c == '.';
    });
}

bool valid_target(std::string_view t) {
    return std::none_of(t.begin(), t.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
    });
}

// path[?query] -> normalised, with a leading '/'.
Result<std::string> normalise_target(std::string_view target) {
    if (!valid_target(target)) return make_error("URL path contains spaces or control characters");
    auto q = target.find('?');
    std::string path(target.substr(0, q));
    if (path.empty() || path.front() != '/') path.insert(path.begin(), '/');
    std::string out = remove_dot_segments(path);
    if (q != std::string_view::npos) out += target.substr(q);
    return out;
}

}  // namespace

std::string Url::to_string() const {
    return "https://" + host_header_value(host, port) + target;
}

Result<Url> parse_url(std::string_view text) {
    const std::string_view original = text;
    if (auto hash = text.find('#'); hash != std::string_view::npos) text = text.substr(0, hash);
    if (auto sep = text.find("://"); sep != std::string_view::npos) {
        auto scheme = ascii_lower(text.substr(0, sep));
        if (scheme == "http")
            return make_error("refusing insecure URL \"" + std::string(original) + "\" (only https is supported)");
        if (scheme != "https")
            return make_error("unsupported URL scheme \"" + scheme + "\" in \"" + std::string(original) + "\"");
        text.remove_prefix(sep + 3);
    }
    auto path_start = text.find_first_of("/?");
    auto authority = text.substr(0, path_start);
    if (authority.find('@') != std::string_view::npos)
        return make_error("URL \"" + std::string(original) + "\": user names in URLs are not supported");

    Url url;
    std::string_view port_text;
    if (!authority.empty() && authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos)
            return make_error("URL \"" + std::string(original) + "\": unterminated IPv6 literal");
        url.host = ascii_lower(authority.substr(1, close - 1));
        auto after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return make_error("URL \"" + std::string(original) + "\": junk after ']'");
            port_text = after.substr(1);
        }
        if (!ipv6_literal_chars(url.host))
            return make_error("URL \"" + std::string(original) + "\": invalid IPv6 address");
    } else if (std::count(authority.begin(), authority.end(), ':') > 1) {
        // A bare IPv6 literal (portals list gateways as "2001:db8::1"): all of it is the
        // address, so no port can follow without brackets.
        url.host = ascii_lower(authority);
        if (!ipv6_literal_chars(url.host))
            return make_error("URL \"" + std::string(original) + "\": invalid host \"" + url.host +
                              "\" (an IPv6 address with a port needs brackets: [addr]:port)");
    } else {
        auto colon = authority.find(':');
        url.host = ascii_lower(authority.substr(0, colon));
        if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
        if (url.host.empty())
            return make_error("URL \"" + std::string(original) + "\" has no host name");
        if (!std::all_of(url.host.begin(), url.host.end(),
                         [](char c) { return is_alpha(c) || is_ascii_digit(c) || c == '-' || c == '.' || c == '_'; }))
            return make_error("URL \"" + std::string(original) + "\": invalid host name \"" + url.host + "\"");
    }
    if (std::count(authority.begin(), authority.end(), ':') == 1 && authority.front() != '[' && port_text.empty())
        return make_error("URL \"" + std::string(original) + "\": empty port");
    if (!port_text.empty()) {
        if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(), is_ascii_digit))
            return make_error("URL \"" + std::string(original) + "\": invalid port \"" + std::string(port_text) + "\"");
        unsigned long port = std::stoul(std::string(port_text));
        if (port == 0 || port > 65535)
            return make_error("URL \"" + std::string(original) + "\": port " + std::string(port_text) + " out of range");
        url.port = static_cast<std::uint16_t>(port);
    }
    auto target = normalise_target(path_start == std::string_view::npos ? "/" : text.substr(path_start));
    if (!target) return make_error("URL \"" + std::string(original) + "\": " + target.error().message);
    url.target = std::move(*target);
    return url;
}

Result<Url> resolve_location(const Url& base, std::string_view location) {
    while (!location.empty() && (location.front() == ' ' || location.front() == '\t')) location.remove_prefix(1);
    while (!location.empty() && (location.back() == ' ' || location.back() == '\t')) location.remove_suffix(1);
    if (location.empty()) return make_error("redirect without a Location");
    if (auto hash = location.find('#'); hash != std::string_view::npos) location = location.substr(0, hash);

    // An absolute URL starts with a scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
    auto colon = location.find(':');
    auto first_delim = location.find_first_of("/?");
    if (colon != std::string_view::npos && colon > 0 && colon < first_delim && is_alpha(location.front()) &&
        std::all_of(location.begin(), location.begin() + static_cast<std::ptrdiff_t>(colon),
                    [](char c) { return is_alpha(c) || is_ascii_digit(c) || c == '+' || c == '-' || c == '.'; })) {
        if (location.substr(colon, 3) != "://")
            return make_error("unsupported redirect target \"" + std::string(location) + "\"");
        return parse_url(location);
    }
    if (location.substr(0, 2) == "//") return parse_url("https:" + std::string(location));

    Url out = base;
    std::string_view base_path = std::string_view(base.target).substr(0, base.target.find('?'));
    std::string merged;
    if (location.front() == '/') {
        merged = location;
    } else if (location.front() == '?') {
        merged = std::string(base_path) + std::string(location);
    } else {
        merged = std::string(base_path.substr(0, base_path.rfind('/') + 1)) + std::string(location);
    }
    auto target = normalise_target(merged);
    if (!target) return make_error("redirect to \"" + std::string(location) + "\": " + target.error().message);
    out.target = std::move(*target);
    return out;
}

RedirectAction redirect_action(int status, std::string_view method) {
    if (status == 303) return {method == "HEAD" ? "HEAD" : "GET", false};
    if ((status == 301 || status == 302) && method == "POST") return {"GET", false};
    return {std::string(method), true};
}

}  // namespace espvpn::http
