// HTTPS requests for a login: one kept-alive TLS connection per host, reused by
// every request; a connection the server closed while idle is reopened and the
// request resent once. Cookies go through one CookieJar; redirects are followed
// on request, up to a limit. Counts TLS handshakes so a login can report them.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/http/cookie_jar.h"
#include "protocols/http/message.h"
#include "protocols/http/response_parser.h"
#include "protocols/http/url.h"
#include "src/io/tls_stream.h"

namespace espvpn::io {

struct HttpsClientConfig {
    TlsClientConfig tls;
    http::ParserLimits limits;                       // per-response caps
    int max_redirects = 10;
    std::chrono::milliseconds response_timeout{60000};  // whole response, against a dribbling server
    bool keep_alive = true;                          // false: a new connection per request (--no-http-keepalive)
};

// What a login reports about a server it talked to (openconnect's HOST= and
// FINGERPRINT= lines): the numeric address connected to and its key pin.
struct HttpsPeer {
    std::string address;  // numeric, e.g. "127.0.0.1" or "::1": the TCP peer (the proxy's with --proxy)
    std::string pin;      // "pin-sha256:..."
    // Where UDP (ESP, DTLS) goes: the server's numeric address, looked up here when a
    // proxy carried the TCP connection ("" if the name does not resolve here).
    std::string server_address;
    bool via_proxy = false;
    std::string cert_md5; // hex MD5 of its certificate (the CSD host scan reports it)
};

struct HttpsStats {
    std::size_t handshakes = 0;   // TLS handshakes completed
    std::size_t requests = 0;     // responses received
    std::size_t reopened = 0;     // connections reopened because the server closed the kept-alive one
    std::size_t max_requests_per_connection = 0;
};

enum class Redirects { no, follow };

class HttpsClient {
public:
    static Result<HttpsClient> create(HttpsClientConfig config);

    // Sends the request (Cookie header from the jar unless request.cookie is
    // set) and reads the whole response; Set-Cookie lines go into the jar.
    // With Redirects::follow, 3xx responses with a Location are followed.
    // CONNECT is refused here: see release_connection().
    Result<http::Response> send(http::Request request, Redirects redirects = Redirects::no);

    // The URL the last response came from (differs from the request after redirects).
    const http::Url& last_url() const { return last_url_; }

    // Hands over the kept-alive connection to host:port (opening one if there is
    // none), e.g. for an AnyConnect CONNECT or a GlobalProtect tunnel on the same
    // TLS session. The client forgets it.
    Result<std::unique_ptr<TlsStream>> release_connection(const std::string& host, std::uint16_t port);

    // The last connection made to host:port, if any (kept after it closes).
    std::optional<HttpsPeer> peer(const std::string& host, std::uint16_t port) const;
    // Every numeric address `host` resolves to here (its --resolve address if it has one;
    // empty when it does not resolve).
    std::vector<std::string> addresses_of(const std::string& host) const;

    // The trust anchors, pins and client certificate this client connects with
    // (e.g. for probing other servers under the same rules).
    std::shared_ptr<const TlsCredentials> credentials() const { return credentials_; }

    http::CookieJar& cookies() { return cookies_; }
    const HttpsStats& stats() const { return stats_; }
    // Logs at info how many TLS handshakes and requests `what` (e.g. "login") took; at debug only when
    // no request completed (a login that failed before its first answer).
    void log_summary(std::string_view what) const;
    // Closes every kept-alive connection.
    void close_all();
    // --dump-http-traffic: a request's header lines ("> "), a response's status and header
    // lines ("< ") with the Set-Cookie values left out. Bodies are the caller's to log.
    static void dump_headers(const http::Headers& headers);
    static void dump_response_head(const http::Response& response);
    // From now on every wait (connect, handshake, request) ends at once when `fd` turns
    // readable (a LinkAttempt's cancel fd); -1: none.
    void set_cancel_fd(int fd);

private:
    struct Connection {
        std::unique_ptr<TlsStream> stream;
        std::size_t requests = 0;
    };

    explicit HttpsClient(HttpsClientConfig config, std::shared_ptr<const TlsCredentials> credentials);
    Result<http::Response> send_once(http::Request& request);
    Result<Connection*> connection_to(const std::string& host, std::uint16_t port);
    void drop(const std::string& host, std::uint16_t port);

    HttpsClientConfig config_;
    std::shared_ptr<const TlsCredentials> credentials_;
    std::map<std::string, Connection> connections_;  // by "host:port"
    std::map<std::string, HttpsPeer> peers_;         // by "host:port", last connection
    http::CookieJar cookies_;
    http::ResponseParser parser_;
    HttpsStats stats_;
    http::Url last_url_;
    int cancel_fd_ = -1;  // set_cancel_fd
};

}  // namespace espvpn::io
