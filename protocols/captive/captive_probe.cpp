#include "protocols/captive/captive_probe.h"

#include <algorithm>
#include <cctype>

namespace espvpn::captive {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

bool host_char_ok(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

std::string authority(const HttpUrl& u) {
    const std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
    return u.port == 80 ? host : host + ":" + std::to_string(u.port);
}

}  // namespace

std::string HttpUrl::text() const { return "http://" + authority(*this) + target; }

Result<HttpUrl> parse_http_url(std::string_view text) {
    if (!starts_with_ci(text, "http://")) return make_error("not an http:// URL");
    std::string_view rest = text.substr(7);
    const std::size_t end = rest.find_first_of("/?#");
    std::string_view auth = rest.substr(0, end);
    std::string_view tail = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (auto hash = tail.find('#'); hash != std::string_view::npos) tail = tail.substr(0, hash);
    if (auth.find('@') != std::string_view::npos) return make_error("a user name in the URL");
    HttpUrl u;
    std::string_view port;
    bool port_given = false;
    if (!auth.empty() && auth.front() == '[') {
        const std::size_t close = auth.find(']');
        if (close == std::string_view::npos) return make_error("an unclosed [ in the host");
        u.host = lower(auth.substr(1, close - 1));
        std::string_view after = auth.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return make_error("junk after the IPv6 address");
            port = after.substr(1);
            port_given = true;
        }
        for (char c : u.host)
            if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
                return make_error("a bad IPv6 address");
    } else {
        const std::size_t colon = auth.find(':');
        u.host = lower(auth.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = auth.substr(colon + 1);
            port_given = true;
        }
        for (char c : u.host)
            if (!host_char_ok(c)) return make_error("a bad character in the host name");
    }
    if (u.host.empty() || u.host.size() > 253) return make_error("no host, or a host name too long");
    if (port_given) {
        if (port.empty() || port.size() > 5 ||
            !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return make_error("a bad port");
        const int p = std::stoi(std::string(port));
        if (p < 1 || p > 65535) return make_error("a port out of range");
        u.port = static_cast<std::uint16_t>(p);
    }
    if (tail.empty()) {
        u.target = "/";
    } else if (tail.front() == '?') {
        u.target = "/" + std::string(tail);
    } else {
        u.target = std::string(tail);
    }
    for (char c : u.target)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            return make_error("a space or control character in the path");
    return u;
}

Result<ProbeSpec> parse_probe_spec(std::string_view text) {
    ProbeSpec spec;
    const std::size_t comma = text.find(',');
    auto url = parse_http_url(trim(text.substr(0, comma)));
    if (!url) return make_error("--captive-probe " + std::string(trim(text.substr(0, comma))) + ": " + url.error().message +
                                " (http://HOST[:PORT]/PATH[,EXPECTED BODY])");
    spec.url = std::move(*url);
    spec.expected = comma == std::string_view::npos ? std::string(kDefaultExpected)
                                                    : std::string(trim(text.substr(comma + 1)));
    if (spec.expected.size() > 1024) return make_error("--captive-probe: the expected body is longer than 1024 bytes");
    return spec;
}

ProbeSpec default_probe_spec() { return parse_probe_spec(kDefaultProbeUrl).value(); }

std::string printable_url(std::string_view raw) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (char ch : raw) {
        const auto c = static_cast<unsigned char>(ch);
        if (c > 0x20 && c < 0x7f) {
            out += ch;
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

Verdict classify(const ProbeSpec& spec, const ProbeAnswer& a) {
    Verdict v;
    const std::string status = std::to_string(a.status);
    if (a.status >= 300 && a.status < 400) {
        v.kind = Verdict::Kind::portal;
        std::string_view loc = trim(a.location);
        std::string url;
        if (starts_with_ci(loc, "http://") || starts_with_ci(loc, "https://")) {
            url = std::string(loc);
        } else if (loc.size() >= 2 && loc.substr(0, 2) == "//") {
            url = "http:" + std::string(loc);
        } else if (!loc.empty() && loc.front() == '/') {
            url = "http://" + authority(spec.url) + std::string(loc);
        } else if (!loc.empty() && loc.find(':') == std::string_view::npos) {
            const std::string& t = spec.url.target;
            url = "http://" + authority(spec.url) + t.substr(0, t.rfind('/') + 1) + std::string(loc);
        }
        // No Location, another scheme (javascript:, file:) or a monster: the probe's own URL,
        // which the portal intercepts in the browser too.
        if (url.empty() || url.size() > kMaxPortalUrl) {
            v.portal_url = spec.url.text();
            v.why = "HTTP " + status + " without a usable Location";
        } else {
            v.portal_url = printable_url(url);
            v.why = "HTTP " + status + " redirect";
        }
        return v;
    }
    if (a.status == 200 || a.status == 204) {
        const std::string_view body = trim(a.body);
        if (!a.truncated && body == spec.expected) {
            v.kind = Verdict::Kind::online;
            v.why = "the expected answer";
            return v;
        }
        v.kind = Verdict::Kind::portal;
        v.portal_url = spec.url.text();
        v.why = "HTTP " + status + " with another page (" + std::to_string(a.body.size()) +
                (a.truncated ? "+ bytes, cut" : " bytes") + ")";
        return v;
    }
    v.why = "HTTP " + status;
    return v;
}

}  // namespace espvpn::captive
