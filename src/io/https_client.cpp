#include "src/io/https_client.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "src/io/udp_socket.h"
#include "src/log/logger.h"

namespace espvpn::io {

namespace {

constexpr std::size_t kReadChunk = 16 * 1024;

std::string origin_key(const std::string& host, std::uint16_t port) { return host + "|" + std::to_string(port); }

// For logs: a URL without its query, which may carry tokens.
std::string without_query(const http::Url& url) {
    auto text = url.to_string();
    return text.substr(0, text.find('?'));
}

std::string numeric_peer_address(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
    return numeric_host(reinterpret_cast<const sockaddr*>(&addr));
}

// Every address (numeric, the resolver's order, at most 32) this host's resolver or
// --resolve gives for host.
std::vector<std::string> resolved_addresses(const std::string& host, const TlsClientConfig& tls) {
    if (auto it = tls.resolve.find(host); it != tls.resolve.end()) return {it->second};
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return {};
    std::vector<std::string> out;
    for (const addrinfo* a = list; a && out.size() < 32; a = a->ai_next) {
        std::string text = numeric_host(a->ai_addr);
        if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(std::move(text));
    }
    ::freeaddrinfo(list);
    return out;
}

// The server's own address when a proxy stands between: what this host's resolver
// (or --resolve) says, for the UDP channels that go direct.
std::string numeric_server_address(const std::string& host, const TlsClientConfig& tls) {
    std::vector<std::string> all = resolved_addresses(host, tls);
    if (all.empty()) {
        LOG_INFO << "cannot resolve " << host << " here (the proxy did): no direct UDP (ESP/DTLS) to it";
        return {};
    }
    return all.front();
}

}  // namespace

std::vector<std::string> HttpsClient::addresses_of(const std::string& host) const {
    return resolved_addresses(host, config_.tls);
}

HttpsClient::HttpsClient(HttpsClientConfig config, std::shared_ptr<const TlsCredentials> credentials)
    : config_(std::move(config)), credentials_(std::move(credentials)), parser_(config_.limits) {
    config_.tls.key_password.clear();  // the loaded credentials hold what is needed
}

Result<HttpsClient> HttpsClient::create(HttpsClientConfig config) {
    auto credentials = TlsCredentials::load(config.tls);
    if (!credentials) return credentials.error();
    return HttpsClient(std::move(config), std::move(*credentials));
}

Result<HttpsClient::Connection*> HttpsClient::connection_to(const std::string& host, std::uint16_t port) {
    auto key = origin_key(host, port);
    if (auto it = connections_.find(key); it != connections_.end()) {
        if (it->second.stream->usable_when_idle()) return &it->second;
        LOG_DEBUG << "server " << it->second.stream->endpoint() << " closed the idle connection; reconnecting";
        ++stats_.reopened;
        connections_.erase(it);
    }
    TlsConnectControl control;
    control.cancel_fd = cancel_fd_;
    auto stream = TlsStream::connect(host, port, credentials_, control);
    if (!stream) return stream.error();
    ++stats_.handshakes;
    HttpsPeer peer{numeric_peer_address((*stream)->fd()), (*stream)->peer_pin(), {}, (*stream)->via_proxy(),
                   (*stream)->peer_cert_md5()};
    peer.server_address = peer.via_proxy ? numeric_server_address(host, config_.tls) : peer.address;
    peers_[key] = std::move(peer);
    LOG_DEBUG << "TLS connection #" << stats_.handshakes << " to " << (*stream)->endpoint() << ": "
              << (*stream)->description();
    auto [it, inserted] = connections_.insert_or_assign(key, Connection{std::move(*stream), 0});
    return &it->second;
}

void HttpsClient::set_cancel_fd(int fd) {
    cancel_fd_ = fd;
    for (auto& [key, c] : connections_) c.stream->set_cancel_fd(fd);
}

void HttpsClient::drop(const std::string& host, std::uint16_t port) {
    if (auto it = connections_.find(origin_key(host, port)); it != connections_.end()) {
        it->second.stream->close();
        connections_.erase(it);
    }
}

Result<http::Response> HttpsClient::send_once(http::Request& request) {
    const bool cookie_from_jar = request.cookie.empty();
    if (cookie_from_jar) request.cookie = cookies_.cookie_header(request.host, request.target);
    auto wire = http::serialize(request);
    if (cookie_from_jar) request.cookie.clear();
    if (!wire) return wire.error();

    std::vector<std::uint8_t> rx(kReadChunk);
    struct ZeroOnExit {
        std::vector<std::uint8_t>& buf;
        ~ZeroOnExit() { secure_zero(buf.data(), buf.size()); }
    } zero_rx{rx};

    for (int attempt = 0; attempt < 2; ++attempt) {
        auto conn = connection_to(request.host, request.port);
        if (!conn) return conn.error();
        Connection& c = **conn;
        TlsStream& stream = *c.stream;
        const bool may_retry = c.requests > 0 && attempt == 0;
        const auto deadline = std::chrono::steady_clock::now() + config_.response_timeout;
        // Ends the request with `message` (made before: it may name the stream) and drops the connection.
        auto fail = [&](std::string message) {
            drop(request.host, request.port);
            return make_error(std::move(message));
        };
        auto retry_or_fail = [&](const Error& error) -> std::optional<Error> {
            // A kept-alive connection the server dropped before answering: resend once.
            if (may_retry && stream.peer_closed() && !parser_.started()) {
                LOG_DEBUG << "server " << stream.endpoint() << " closed the kept-alive connection ("
                          << error.message << "); resending on a new one";
                ++stats_.reopened;
                drop(request.host, request.port);
                return std::nullopt;
            }
            std::string message = error.message;
            if (std::chrono::steady_clock::now() >= deadline)
                message = "no complete response from " + stream.endpoint() + " within " +
                          std::to_string(config_.response_timeout.count()) + " ms: " + message;
            return fail(std::move(message));
        };

        parser_.begin(request.method);
        if (auto st = stream.write_all(wire->reveal(), deadline); !st) {
            if (auto e = retry_or_fail(st.error())) return *e;
            continue;
        }
        bool trailing_bytes = false;
        bool retry = false;
        while (!parser_.done()) {
            auto n = stream.read_some(rx, deadline);
            if (!n) {
                if (auto e = retry_or_fail(n.error())) return *e;
                retry = true;
                break;
            }
            if (*n == 0) {
                if (auto st = parser_.finish_eof(); !st) {
                    if (auto e = retry_or_fail(
                            make_error(st.error().message + " (from " + stream.endpoint() + ")")))
                        return *e;
                    retry = true;
                }
                break;
            }
            // read_some only looks at the deadline when it has to wait: a server that keeps
            // data coming (an endless body below the size limit) must not outlast it either.
            if (std::chrono::steady_clock::now() >= deadline)
                return fail("no complete response from " + stream.endpoint() + " within " +
                            std::to_string(config_.response_timeout.count()) + " ms: the server kept sending");
            auto used = parser_.feed(std::span<const std::uint8_t>(rx.data(), *n));
            if (!used) return fail(used.error().message + " (from " + stream.endpoint() + ")");
            trailing_bytes = *used < *n;
        }
        if (retry) continue;

        http::Response response = parser_.take_response();
        ++c.requests;
        ++stats_.requests;
        stats_.max_requests_per_connection = std::max(stats_.max_requests_per_connection, c.requests);
        for (const auto& line : response.set_cookies) {
            if (auto st = cookies_.store(request.host, request.target, line); !st) {
                LOG_WARN << "ignoring a cookie from " << stream.endpoint() << ": " << st.error().message;
            }
        }
        if (!response.keep_alive || !config_.keep_alive || trailing_bytes || stream.peer_closed()) {
            LOG_DEBUG << "closing the connection to " << stream.endpoint() << " after " << c.requests
                      << " request(s)" << (response.keep_alive ? "" : " (server asked to close)");
            drop(request.host, request.port);
        }
        return response;
    }
    return make_error("the server " + request.host + " closed the connection again after a reconnect");
}

Result<http::Response> HttpsClient::send(http::Request request, Redirects redirects) {
    if (request.method == "CONNECT")
        return make_error("CONNECT turns the connection into a tunnel: use release_connection() and write it yourself");
    for (int hop = 0;; ++hop) {
        auto response = send_once(request);
        if (!response) return response;
        last_url_ = http::Url{request.host, request.port, request.target};
        if (redirects == Redirects::no || !response->is_redirect()) return response;
        auto location = response->headers.get("Location");
        if (!location) return response;  // a 3xx without Location is final
        if (hop >= config_.max_redirects)
            return make_error("more than " + std::to_string(config_.max_redirects) + " redirects, last from " +
                              without_query(last_url_));
        auto next = http::resolve_location(last_url_, *location);
        if (!next) return make_error("bad redirect from " + without_query(last_url_) + ": " + next.error().message);
        auto action = http::redirect_action(response->status, request.method);
        LOG_DEBUG << "HTTP " << response->status << " redirect to " << without_query(*next) << " (" << action.method
                  << ")";
        request.method = action.method;
        if (!action.keep_body) {
            request.body.clear();
            request.headers.remove("Content-Type");
            request.headers.remove("Content-Length");
        }
        request.host = next->host;
        request.port = next->port;
        request.target = next->target;
    }
}

Result<std::unique_ptr<TlsStream>> HttpsClient::release_connection(const std::string& host, std::uint16_t port) {
    auto conn = connection_to(host, port);
    if (!conn) return conn.error();
    auto stream = std::move((*conn)->stream);
    connections_.erase(origin_key(host, port));
    return stream;
}

std::optional<HttpsPeer> HttpsClient::peer(const std::string& host, std::uint16_t port) const {
    if (auto it = peers_.find(origin_key(host, port)); it != peers_.end()) return it->second;
    return std::nullopt;
}

void HttpsClient::log_summary(std::string_view what) const {
    // Nothing was asked (e.g. the name did not resolve): the error says it all, so the count
    // is no news worth a line before it, except at -v.
    if (stats_.requests == 0) {
        LOG_DEBUG << what << ": no HTTPS request completed (" << stats_.handshakes << " TLS handshake(s))";
        return;
    }
    LOG_INFO << what << ": " << stats_.requests << " HTTPS request(s) over " << stats_.handshakes
             << " TLS handshake(s)"
             << (stats_.reopened ? ", " + std::to_string(stats_.reopened) + " reconnect(s) after the server closed"
                                 : std::string());
}

void HttpsClient::dump_headers(const http::Headers& headers) {
    for (const auto& [name, value] : headers.fields()) LOG_DEBUG << "> " << name << ": " << value;
}

void HttpsClient::dump_response_head(const http::Response& response) {
    LOG_DEBUG << "< HTTP " << response.status << " " << response.reason;
    for (const auto& [name, value] : response.headers.fields()) LOG_DEBUG << "< " << name << ": " << value;
    if (!response.set_cookies.empty())
        LOG_DEBUG << "< (" << response.set_cookies.size() << " Set-Cookie header(s), values redacted)";
}

void HttpsClient::close_all() {
    for (auto& [key, c] : connections_) c.stream->close();
    connections_.clear();
}

}  // namespace espvpn::io
