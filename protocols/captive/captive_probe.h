// Captive portal detection (docs/SERVICE.md "Captive portals"), sans-IO: when the gateway
// cannot be reached, espvpn fetches a plain-HTTP page whose answer it knows (by default
// NetworkManager's connectivity check). The expected body means the network is open; a
// redirect (3xx) or another 200 body means a captive portal stands in between; anything
// else (no answer, 4xx, 5xx) says nothing about a portal. The portal's URL comes from the
// network: it is made printable here before anyone logs, prints or opens it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocols/base/result.h"

namespace espvpn::captive {

inline constexpr std::string_view kDefaultProbeUrl = "http://nmcheck.gnome.org/check_network_status.txt";
inline constexpr std::string_view kDefaultExpected = "NetworkManager is online";
// The most of an answer the probe reads (head and body); the rest is never read.
inline constexpr std::size_t kMaxAnswerBytes = 16 * 1024;
// The longest portal URL kept (a longer one is not used: the probe URL is opened instead).
inline constexpr std::size_t kMaxPortalUrl = 2048;

// An http:// URL split for a plain TCP request.
struct HttpUrl {
    std::string host;  // lowercase; an IPv6 literal without brackets
    std::uint16_t port = 80;
    std::string target = "/";  // path and query
    std::string text() const;  // "http://host[:port]/target"
};
Result<HttpUrl> parse_http_url(std::string_view text);

// --captive-probe=URL[,EXPECTED]: EXPECTED (default kDefaultExpected) is what the body must
// be (surrounding white space ignored). Only http://: a portal cannot answer https:// as the
// site, so a probe over TLS would never see one.
struct ProbeSpec {
    HttpUrl url;
    std::string expected;
};
Result<ProbeSpec> parse_probe_spec(std::string_view text);
ProbeSpec default_probe_spec();

// What came back (io/http_probe reads it, bounded by kMaxAnswerBytes).
struct ProbeAnswer {
    int status = 0;
    std::string location;   // the raw Location header, "" when none
    std::string body;       // at most kMaxAnswerBytes
    bool truncated = false; // the body went on past what was read
};

struct Verdict {
    enum class Kind {
        online,   // the expected answer: no portal
        portal,   // a redirect or another page: a captive portal
        unknown,  // no verdict (an error status): not a portal as far as we know
    };
    Kind kind = Kind::unknown;
    std::string portal_url;  // portal: printable ASCII only, at most kMaxPortalUrl
    std::string why;         // for the log: printable too
};
Verdict classify(const ProbeSpec& spec, const ProbeAnswer& answer);

// `raw` with every byte outside printable ASCII (controls, space, DEL, 8-bit) percent-encoded,
// so that no terminal escape or line break survives and the URL still works in a browser.
std::string printable_url(std::string_view raw);

}  // namespace espvpn::captive
