// The status and control socket's messages (docs/SERVICE.md): one JSON object per
// line each way. A client sends {"request": "status" | "disconnect" | "reconnect"};
// the session answers {"ok": true, ...} or {"ok": false, "error": "..."}. Sans-IO:
// lines in, lines out (src/session/status_server does the socket).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocols/base/result.h"

namespace espvpn::status {

// The longest request line the server reads (a longer one is refused and the client closed).
inline constexpr std::size_t kMaxRequestLine = 1024;

// trusted_network: --always-on on a trusted network (--trusted-domain, --trusted-server, GP's
// internal host detection): no tunnel until the host leaves it. captive_portal: the gateway
// cannot be reached and a captive portal answers instead (Snapshot::portal: its page).
enum class State { off, connecting, connected, reconnecting, needs_login, trusted_network, captive_portal };
// "off", "connecting", "connected", "reconnecting", "needs-login", "trusted-network", "captive-portal"
const char* state_name(State s);
std::optional<State> state_from_name(std::string_view name);

// What `espvpn status` reports.
struct Snapshot {
    State state = State::off;
    std::string protocol;       // "gp" | "anyconnect"
    std::string gateway;        // host[:port] of the tunnel's server ("" before the login)
    std::string transport;      // "ESP" | "HTTPS" | "DTLS" | "CSTP" | "" (no link)
    std::int64_t since = 0;     // Unix time the state began
    std::uint64_t bytes_in = 0;   // inner bytes from the tunnel (the tun device's counters)
    std::uint64_t bytes_out = 0;  // inner bytes into the tunnel
    std::int64_t expires = 0;   // Unix time the session (cookie) expires; 0: not known
    std::string last_error;     // the last loss or failure ("" none)
    std::string interface_name; // the tun device ("" while there is none)
    bool always_on = false;
    std::string portal;         // captive_portal: the portal's page (printable ASCII); else ""
};

enum class Request { status, disconnect, reconnect };
const char* request_name(Request r);

// One request line (without its newline): an error names what was wrong.
Result<Request> parse_request(std::string_view line);
std::string request_line(Request r);  // with the newline

// Replies, each one line ending with a newline.
std::string status_reply(const Snapshot& s);
std::string ok_reply(std::string_view message);
std::string error_reply(std::string_view message);

// A reply line as a client reads it.
struct Reply {
    bool ok = false;
    std::string error;            // !ok
    std::string message;          // ok, disconnect/reconnect
    std::optional<Snapshot> status;  // ok, status
};
Result<Reply> parse_reply(std::string_view line);

}  // namespace espvpn::status
