#include "protocols/http/message.h"

#include <algorithm>
#include <charconv>

#include "protocols/http/secret_buffer.h"

namespace espvpn::http {

namespace {

bool is_tchar(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// Field values and targets may hold any visible byte, but never CR, LF or NUL.
bool safe_on_one_line(std::string_view s) {
    return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

}  // namespace

void Headers::set(std::string_view name, std::string value) {
    remove(name);
    add(std::string(name), std::move(value));
}

void Headers::remove(std::string_view name) {
    std::erase_if(fields_, [&](const auto& f) { return iequals(f.first, name); });
}

std::optional<std::string_view> Headers::get(std::string_view name) const {
    for (const auto& [n, v] : fields_)
        if (iequals(n, name)) return std::string_view(v);
    return std::nullopt;
}

std::vector<std::string_view> Headers::get_all(std::string_view name) const {
    std::vector<std::string_view> out;
    for (const auto& [n, v] : fields_)
        if (iequals(n, name)) out.emplace_back(v);
    return out;
}

bool Headers::list_contains(std::string_view name, std::string_view token) const {
    for (auto value : get_all(name)) {
        while (!value.empty()) {
            auto comma = value.find(',');
            if (iequals(trim_blanks(value.substr(0, comma)), token)) return true;
            if (comma == std::string_view::npos) break;
            value.remove_prefix(comma + 1);
        }
    }
    return false;
}

std::string host_header_value(std::string_view host, std::uint16_t port) {
    std::string out;
    bool ipv6 = host.find(':') != std::string_view::npos;
    if (ipv6) out += '[';
    out += host;
    if (ipv6) out += ']';
    if (port != 443) out += ':' + std::to_string(port);
    return out;
}

Result<Secret> serialize(const Request& request) {
    if (!is_token(request.method))
        return make_error("HTTP request: invalid method \"" + request.method + "\"");
    if (request.target.empty() || !safe_on_one_line(request.target) ||
        request.target.find(' ') != std::string::npos)
        return make_error("HTTP request: invalid target \"" + request.target + "\"");
    if (request.host.empty() || !safe_on_one_line(request.host) || request.host.find(' ') != std::string::npos)
        return make_error("HTTP request: invalid host \"" + request.host + "\"");
    for (const auto& [name, value] : request.headers.fields()) {
        if (!is_token(name)) return make_error("HTTP request: invalid header name \"" + name + "\"");
        if (!safe_on_one_line(value))
            return make_error("HTTP request: header " + name + " has a line break or NUL in its value");
        if (iequals(name, "Host") || iequals(name, "Cookie"))
            return make_error("HTTP request: set " + name + " through Request::host/cookie, not headers");
    }
    if (!safe_on_one_line(request.cookie.reveal_text()))
        return make_error("HTTP request: the Cookie value has a line break or NUL");

    SecretBuffer out;
    out.append(request.method);
    out.append(" ");
    out.append(request.target);
    out.append(" HTTP/1.1\r\nHost: ");
    out.append(host_header_value(request.host, request.port));
    out.append("\r\n");
    for (const auto& [name, value] : request.headers.fields()) {
        out.append(name);
        out.append(": ");
        out.append(value);
        out.append("\r\n");
    }
    if (!request.cookie.empty()) {
        out.append("Cookie: ");
        out.append(request.cookie);
        out.append("\r\n");
    }
    bool body_allowed = !(request.method == "GET" || request.method == "HEAD" || request.method == "CONNECT");
    if (!request.headers.has("Content-Length") && !request.headers.has("Transfer-Encoding") &&
        (!request.body.empty() || body_allowed)) {
        out.append("Content-Length: " + std::to_string(request.body.size()) + "\r\n");
    }
    out.append("\r\n");
    out.append(request.body);
    return out.take_secret();
}

bool Response::is_redirect() const {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

}  // namespace espvpn::http
