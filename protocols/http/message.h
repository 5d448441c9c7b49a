// HTTP/1.1 messages as plain values: header lists, a request to serialize and the
// parsed response. Everything that can hold a credential (request body, Cookie
// header, response body, Set-Cookie lines) is a Secret, so it is zeroed when
// dropped and prints as <redacted>.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/base/ascii.h"
#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::http {

using espvpn::iequals;

// Headers in the order they were added or received; names compare case-insensitively
// and repeated headers are all kept.
class Headers {
public:
    void add(std::string name, std::string value) { fields_.emplace_back(std::move(name), std::move(value)); }
    // Replaces every field of that name with one (added at the end if absent).
    void set(std::string_view name, std::string value);
    void remove(std::string_view name);

    bool has(std::string_view name) const { return get(name).has_value(); }
    // The first field of that name.
    std::optional<std::string_view> get(std::string_view name) const;
    std::vector<std::string_view> get_all(std::string_view name) const;
    // True if a comma-separated header (Connection, Transfer-Encoding) lists token.
    bool list_contains(std::string_view name, std::string_view token) const;

    const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
    std::size_t size() const { return fields_.size(); }
    bool empty() const { return fields_.empty(); }

private:
    std::vector<std::pair<std::string, std::string>> fields_;
};

struct Request {
    std::string method = "GET";
    std::string target = "/";   // origin-form: path plus optional ?query
    std::string host;           // without brackets for IPv6 literals
    std::uint16_t port = 443;
    Headers headers;            // sent in order after Host; never secret
    Secret cookie;              // value of the Cookie header; empty = none
    Secret body;                // Content-Length is added when not given
};

// "host" or "host:port" (port omitted when 443), IPv6 literals in brackets.
std::string host_header_value(std::string_view host, std::uint16_t port);

// The whole request, ready to write. A Secret because it may contain the body or
// the Cookie header. Rejects CR/LF/NUL or non-token characters where the wire
// format cannot carry them (header injection).
Result<Secret> serialize(const Request& request);

struct Response {
    int status = 0;
    int version_minor = 1;       // HTTP/1.<minor>
    std::string reason;
    Headers headers;             // every header except Set-Cookie
    std::vector<Secret> set_cookies;  // raw Set-Cookie values, in order
    Headers trailers;            // chunked trailer fields
    Secret body;
    bool keep_alive = true;      // false: the connection ends after this response

    bool is_redirect() const;
};

}  // namespace espvpn::http
