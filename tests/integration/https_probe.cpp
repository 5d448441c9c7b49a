// https_probe: drives io::HttpsClient from the command line for the HTTPS
// integration tests (https_scenarios.py). Sends --requests requests to one URL
// over the client's kept-alive connection and prints what happened:
//   response <i>: status=<code> body_bytes=<n>
//   body: <text>                (with --print-body)
//   failed after <ms> ms        (when a request fails; connect and handshake included)
//   stats: handshakes=<h> requests=<r> reopened=<x>
// Exit 0 when every request got a response, 1 with "error: ..." otherwise.
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "protocols/http/response_parser.h"
#include "protocols/http/url.h"
#include "src/io/https_client.h"
#include "src/log/logger.h"

using namespace espvpn;

namespace {

int usage() {
    std::cerr << "usage: https_probe URL [--cafile F] [--no-system-trust] [--pin pin-sha256:...]...\n"
                 "  [--cert F [--key F]] [--key-password-env VAR] [--resolve HOST:IP] [--io-timeout-ms N]\n"
                 "  [--response-timeout-ms N] [--max-body N] [--max-header-bytes N] [--requests N]\n"
                 "  [--method M] [--body TEXT] [--follow] [--no-keepalive] [--print-body]\n"
                 "  [--then URL] [--release] [--debug]\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    io::HttpsClientConfig config;
    std::string url_text = argv[1];
    std::string then_url;
    int requests = 1;
    std::string method = "GET";
    std::string body;
    bool follow = false, print_body = false, release = false;
    log::Config log_config;
    for (int i = 2; i < argc; ++i) {
        std::string_view arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "https_probe: " << arg << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "--cafile") config.tls.ca_file = value();
        else if (arg == "--no-system-trust") config.tls.system_trust = false;
        else if (arg == "--pin") config.tls.server_pins.push_back(value());
        else if (arg == "--cert") config.tls.client_cert_file = value();
        else if (arg == "--key") config.tls.client_key_file = value();
        else if (arg == "--resolve") {
            auto spec = value();
            auto colon = spec.find(':');
            config.tls.resolve[spec.substr(0, colon)] = colon == std::string::npos ? "" : spec.substr(colon + 1);
        } else if (arg == "--key-password-env") {
            const char* pw = std::getenv(value().c_str());
            config.tls.key_password = Secret::from_string(pw ? pw : "");
        } else if (arg == "--io-timeout-ms") config.tls.io_timeout = std::chrono::milliseconds(std::stol(value()));
        else if (arg == "--response-timeout-ms") config.response_timeout = std::chrono::milliseconds(std::stol(value()));
        else if (arg == "--max-body") config.limits.max_body_bytes = std::stoul(value());
        else if (arg == "--max-header-bytes") config.limits.max_header_bytes = std::stoul(value());
        else if (arg == "--requests") requests = std::stoi(value());
        else if (arg == "--method") method = value();
        else if (arg == "--body") body = value();
        else if (arg == "--follow") follow = true;
        else if (arg == "--no-keepalive") config.keep_alive = false;
        else if (arg == "--print-body") print_body = true;
        else if (arg == "--then") then_url = value();
        else if (arg == "--release") release = true;
        else if (arg == "--debug") log_config.level = log::Level::debug;
        else return usage();
    }
    log::configure(log_config);

    auto client = io::HttpsClient::create(std::move(config));
    if (!client) {
        std::cerr << "error: " << client.error().message << "\n";
        return 1;
    }
    auto run = [&](const std::string& text, int count) -> bool {
        auto url = http::parse_url(text);
        if (!url) {
            std::cerr << "error: " << url.error().message << "\n";
            return false;
        }
        for (int i = 1; i <= count; ++i) {
            http::Request request;
            request.method = method;
            request.host = url->host;
            request.port = url->port;
            request.target = url->target;
            request.headers.add("User-Agent", "espvpn-https-probe");
            if (!body.empty()) {
                request.headers.add("Content-Type", "application/x-www-form-urlencoded");
                request.body = Secret::from_string(body);
            }
            const auto started = std::chrono::steady_clock::now();
            auto response = client->send(std::move(request), follow ? io::Redirects::follow : io::Redirects::no);
            if (!response) {
                auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
                std::cerr << "error: " << response.error().message << "\n";
                std::cout << "failed after " << ms.count() << " ms\n";
                return false;
            }
            std::cout << "response " << i << ": status=" << response->status
                      << " body_bytes=" << response->body.size() << "\n";
            if (print_body) std::cout << "body: " << response->body.reveal_text() << "\n";
        }
        return true;
    };
    // Takes the kept-alive connection out of the client and sends GET /stats on it
    // by hand, as AnyConnect's CONNECT will.
    auto released_stats = [&]() -> bool {
        auto url = http::parse_url(url_text);
        auto stream = client->release_connection(url->host, url->port);
        if (!stream) {
            std::cerr << "error: " << stream.error().message << "\n";
            return false;
        }
        http::Request request;
        request.host = url->host;
        request.port = url->port;
        request.target = "/stats";
        auto wire = http::serialize(request);
        if (auto st = (*stream)->write_all(wire->reveal()); !st) {
            std::cerr << "error: " << st.error().message << "\n";
            return false;
        }
        http::ResponseParser parser;
        parser.begin("GET");
        std::uint8_t buf[4096];
        while (!parser.done()) {
            auto n = (*stream)->read_some(buf);
            if (!n || *n == 0 || !parser.feed(std::span<const std::uint8_t>(buf, *n))) {
                std::cerr << "error: released connection failed\n";
                return false;
            }
        }
        std::cout << "released body: " << parser.take_response().body.reveal_text() << "\n";
        return true;
    };
    bool ok = run(url_text, requests) && (then_url.empty() || run(then_url, 1)) && (!release || released_stats());
    const auto& stats = client->stats();
    std::cout << "stats: handshakes=" << stats.handshakes << " requests=" << stats.requests
              << " reopened=" << stats.reopened << std::endl;
    client->log_summary("probe");
    return ok ? 0 : 1;
}
