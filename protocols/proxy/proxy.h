// Proxies between the client and the VPN server (sans-IO): the --proxy URL, the
// no_proxy rule, HTTP CONNECT (RFC 9110 9.3.6, Basic auth per RFC 7617) and SOCKS5
// (RFC 1928, username/password per RFC 1929) messages. src/io/proxy_tunnel does
// the socket side, under the TLS stream's TCP connect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/http/response_parser.h"

namespace espvpn::proxy {

enum class ProxyKind { http, socks5 };

struct ProxySpec {
    ProxyKind kind = ProxyKind::http;
    std::string host;        // IPv6 literal without brackets
    std::uint16_t port = 0;
    std::string user;        // empty: no authentication offered
    Secret password;

    ProxySpec clone() const { return {kind, host, port, user, password.clone()}; }
    // "http://host:port/" without credentials (for logs and errors).
    std::string display() const;
};

// Accepts "http://[user[:pass]@]host[:port][/]" (port 80 by default), "socks5://...",
// "socks://..." (SOCKS5, port 1080) and, as openconnect does, a bare "host:port" as HTTP.
// User and password are percent-decoded. https:// proxies and other schemes are refused.
Result<ProxySpec> parse_proxy_url(std::string_view text);

// no_proxy as curl and openconnect read it: comma- (or space-) separated host names
// or domain suffixes (".example.com" and "example.com" both match sub.example.com),
// IP literals, "*" for everything; ports are ignored. Case-insensitive.
bool bypasses_proxy(std::string_view host, std::string_view no_proxy);

// Which authentication methods --proxy-auth allows (openconnect's names: Basic,
// Digest, NTLM, GSSAPI/Negotiate; comma-separated, case-insensitive). Without the
// option, as in openconnect, every method but Basic (the password in clear) is allowed:
// of those espvpn answers NTLM.
struct ProxyAuthMethods {
    bool basic = false;
    bool ntlm = true;
    std::vector<std::string> unsupported;  // named but not implemented here
};
Result<ProxyAuthMethods> parse_proxy_auth(std::string_view text);

// ---- HTTP CONNECT ----

// "CONNECT host:port HTTP/1.1" with Host and, when `spec` has a user and `basic`
// is allowed, Proxy-Authorization: Basic. A Secret: it may hold the password.
Secret build_connect_request(const ProxySpec& spec, std::string_view host, std::uint16_t port, bool basic);
// The same with a Proxy-Authorization value of the caller's ("NTLM <token>"; none when null).
Secret build_connect_request(std::string_view host, std::uint16_t port, const Secret* authorization);
// "Basic <base64(user:password)>".
Secret basic_credentials(const ProxySpec& spec);

struct ConnectReply {
    int status = 0;
    std::string reason;
    std::vector<std::string> authenticate;  // Proxy-Authenticate values (scheme first)
    std::size_t header_size = 0;            // bytes read: for a 2xx, up to and including the blank line
    bool keep_alive = false;                // neither Connection nor Proxy-Connection says close
};

// Reads one reply to CONNECT, body included for a refusal (so the connection can
// carry the next request, as NTLM needs): feed bytes until done(). For a 2xx it stops
// at the blank line, leaving the tunnel's bytes to the caller.
class ConnectReplyReader {
public:
    ConnectReplyReader();
    Result<std::size_t> feed(std::span<const std::uint8_t> data);
    // The proxy closed the connection: ends a close-delimited body, an error otherwise.
    Status finish_eof();
    bool head_complete() const { return parser_.head_complete(); }
    bool done() const { return parser_.done(); }
    // Once head_complete().
    ConnectReply reply() const;
    // Once head_complete(): the header lets the connection carry another request
    // (a framed body, no "close"); worth reading the body for.
    bool may_reuse() const;
    // The whole reply was read and the proxy keeps the connection open.
    bool reusable() const { return done() && !eof_ && may_reuse(); }

private:
    http::ResponseParser parser_;
    bool eof_ = false;
};

// Reads the proxy's reply to CONNECT (through http::ResponseParser): nullopt while the
// blank line that ends the header has not arrived; an error for a malformed or
// oversized (> 16 KiB) header.
Result<std::optional<ConnectReply>> parse_connect_reply(std::span<const std::uint8_t> received);

// ---- SOCKS5 ----

inline constexpr std::uint8_t kSocksNoAuth = 0x00;
inline constexpr std::uint8_t kSocksUserPass = 0x02;
inline constexpr std::uint8_t kSocksNoAcceptable = 0xff;

// Version 5, the methods offered: no authentication, plus username/password when
// a user is configured.
std::vector<std::uint8_t> socks5_greeting(bool offer_user_pass);
// The server's choice (2 bytes): the method, or an error naming what was wrong.
Result<std::uint8_t> parse_socks5_choice(std::span<const std::uint8_t> reply, bool offered_user_pass);
// RFC 1929 request (a Secret: it holds the password); user and password <= 255 bytes.
Result<Secret> socks5_user_pass_request(std::string_view user, const Secret& password);
// RFC 1929 reply (2 bytes): ok, or the refusal.
Status parse_socks5_auth_reply(std::span<const std::uint8_t> reply);
// CONNECT to a host name (ATYP 3; the proxy resolves it) or an IP literal (ATYP 1/4).
Result<std::vector<std::uint8_t>> socks5_connect_request(std::string_view host, std::uint16_t port);

// The reply to CONNECT: its length is known only after its first 5 bytes.
// `needed` says how many bytes the whole reply takes (0: need more to tell).
struct Socks5Reply {
    std::size_t needed = 0;
    bool complete = false;
};
// An error when the server refused (the RFC 1928 reply code, in words) or the reply is malformed.
Result<Socks5Reply> parse_socks5_connect_reply(std::span<const std::uint8_t> received);

}  // namespace espvpn::proxy
