// https:// URLs as the login code uses them, and redirect resolution
// (RFC 3986 reference resolution, RFC 9110 method rules).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "protocols/http/message.h"

namespace espvpn::http {

struct Url {
    std::string host;           // lowercase; IPv6 literal without brackets
    std::uint16_t port = 443;
    std::string target = "/";   // path and query, never empty; fragment dropped

    // "https://host[:port]/target" (port only when not 443).
    std::string to_string() const;
    bool same_origin(const Url& other) const { return host == other.host && port == other.port; }
};

// Accepts "https://host[:port][/path][?query][#fragment]" and, as a user
// convenience, a bare "host[:port][/path]". An IPv6 address is "[addr]" or "[addr]:port";
// a bare IPv6 address (two or more ':', as portals list gateways) is taken whole, with the
// default port. Refuses http:// and userinfo.
Result<Url> parse_url(std::string_view text);

// Resolves a Location header value against the URL that was requested:
// absolute, scheme-relative ("//host/x"), absolute-path and relative references.
Result<Url> resolve_location(const Url& base, std::string_view location);

// What to send after a redirect: 303 turns anything but HEAD into GET; 301/302
// turn POST into GET (as browsers and OpenConnect do); 307/308 keep method and body.
struct RedirectAction {
    std::string method;
    bool keep_body = false;
};
RedirectAction redirect_action(int status, std::string_view method);

}  // namespace espvpn::http
