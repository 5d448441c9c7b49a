#include "src/session/trusted_network.h"

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "src/io/cancel_event.h"
#include "src/io/tls_probe.h"

namespace espvpn::session {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::string without_dot(std::string s) {
    while (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

bool is_domain_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

// Shared with the probe threads, which may outlive the call.
struct ProbeBoard {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<std::optional<Result<io::ServerFingerprints>>> answers;
    std::size_t finished = 0;
};

std::string server_name(const TrustedServer& s) {
    const bool v6 = s.host.find(':') != std::string::npos;
    return (v6 ? "[" + s.host + "]" : s.host) + ":" + std::to_string(s.port);
}

}  // namespace

Result<std::string> parse_trusted_domain(std::string_view text) {
    std::string d = without_dot(lower(text));
    std::string_view rest = d;
    if (rest.substr(0, 2) == "*.") rest.remove_prefix(2);
    if (rest.empty() || rest.front() == '.' || rest.find("..") != std::string_view::npos)
        return make_error("--trusted-domain: not a DNS domain: '" + std::string(text) + "'");
    for (char c : rest)
        if (!is_domain_char(c)) return make_error("--trusted-domain: not a DNS domain: '" + std::string(text) + "'");
    return d;
}

Result<TrustedServer> parse_trusted_server(std::string_view text) {
    const std::string given(text);
    const auto comma = text.find(',');
    if (comma == std::string_view::npos)
        return make_error("--trusted-server " + given +
                          ": needs the server certificate's pin (HOST:PORT,pin-sha256:BASE64): any server on any "
                          "network could answer on a port, only its key tells the trusted network");
    std::string_view where = text.substr(0, comma);
    TrustedServer s;
    s.pin_text = std::string(text.substr(comma + 1));
    std::string_view port;
    if (!where.empty() && where.front() == '[') {
        const auto close = where.find(']');
        if (close == std::string_view::npos || where.substr(close + 1, 1) != ":")
            return make_error("--trusted-server " + given + ": expected [IPv6]:PORT");
        s.host = std::string(where.substr(1, close - 1));
        port = where.substr(close + 2);
    } else {
        const auto colon = where.rfind(':');
        if (colon == std::string_view::npos || where.find(':') != colon)
            return make_error("--trusted-server " + given + ": expected HOST:PORT (an IPv6 address in brackets)");
        s.host = std::string(where.substr(0, colon));
        port = where.substr(colon + 1);
    }
    unsigned long n = 0;
    if (s.host.empty() || port.empty() || port.size() > 5) return make_error("--trusted-server " + given + ": expected HOST:PORT");
    for (char c : port) {
        if (c < '0' || c > '9') return make_error("--trusted-server " + given + ": the port is not a number");
        n = n * 10 + static_cast<unsigned long>(c - '0');
    }
    if (n == 0 || n > 65535) return make_error("--trusted-server " + given + ": the port is out of range");
    s.port = static_cast<std::uint16_t>(n);
    auto pin = io::parse_server_cert_pin(s.pin_text);
    if (!pin) return make_error("--trusted-server " + given + ": " + pin.error().message);
    // A short prefix could be matched by a certificate made for it, and a network that
    // says it is trusted turns the tunnel off: only a full-strength pin.
    if (pin->bits() < io::kStrongPinBits)
        return make_error("--trusted-server " + given + ": the pin fixes only " + std::to_string(pin->bits()) +
                          " bits; give the whole digest (at least " + std::to_string(io::kStrongPinBits) + ")");
    s.pin = *pin;
    return s;
}

std::vector<std::string> resolv_conf_domains(std::string_view text) {
    // resolv.conf(5): "domain" and "search" override each other; the last one counts.
    std::vector<std::string> out;
    std::istringstream in{std::string(text)};
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string key;
        if (!(words >> key) || (key != "search" && key != "domain")) continue;
        out.clear();
        for (std::string d; words >> d;) {
            if (d[0] == '#' || d[0] == ';') break;
            d = without_dot(lower(d));
            if (!d.empty()) out.push_back(d);
        }
    }
    return out;
}

bool domain_matches(std::string_view trusted, std::string_view domain) {
    if (trusted.substr(0, 2) == "*.") {
        const std::string_view base = trusted.substr(1);  // ".example.com"
        return domain.size() > base.size() && domain.substr(domain.size() - base.size()) == base;
    }
    return trusted == domain;
}

TrustedProbes host_probes() {
    TrustedProbes p;
    p.read_resolv_conf = []() -> Result<std::string> {
        std::ifstream in("/etc/resolv.conf");
        if (!in) return make_error("cannot read /etc/resolv.conf");
        std::ostringstream text;
        text << in.rdbuf();
        return text.str().substr(0, 64 * 1024);
    };
    p.fetch_certificate = [](const TrustedServer& s, std::chrono::milliseconds budget) {
        return io::probe_server_certificate(s.host, s.port, budget);
    };
    return p;
}

TrustedVerdict detect_trusted_network(const TrustedRules& rules, const TrustedProbes& probes,
                                      std::chrono::milliseconds budget) {
    std::string why;
    if (!rules.domains.empty()) {
        auto text = probes.read_resolv_conf();
        const auto domains = text ? resolv_conf_domains(*text) : std::vector<std::string>{};
        std::string found;
        for (const auto& d : domains)
            for (const auto& t : rules.domains)
                if (found.empty() && domain_matches(t, d)) found = "search domain " + d + " matches --trusted-domain " + t;
        if (found.empty()) {
            std::string seen;
            for (const auto& d : domains) seen += (seen.empty() ? "" : " ") + d;
            if (!text) seen = text.error().message;
            return {false, "untrusted network: no search domain matches --trusted-domain (/etc/resolv.conf: " +
                               (seen.empty() ? std::string("none") : seen) + ")"};
        }
        why = found;
    }
    if (!rules.servers.empty()) {
        auto board = std::make_shared<ProbeBoard>();
        board->answers.resize(rules.servers.size());
        for (std::size_t i = 0; i < rules.servers.size(); ++i) {
            std::thread([board, i, server = rules.servers[i], fetch = probes.fetch_certificate, budget] {
                auto answer = fetch(server, budget);
                std::lock_guard lock(board->mutex);
                board->answers[i] = std::move(answer);
                ++board->finished;
                board->done.notify_all();
            }).detach();
        }
        auto matched = [&](std::size_t i) {
            const auto& a = board->answers[i];
            return a && *a && rules.servers[i].pin.matches(**a);
        };
        std::vector<std::optional<Result<io::ServerFingerprints>>> answers;
        {
            std::unique_lock lock(board->mutex);
            board->done.wait_for(lock, budget, [&] {
                if (board->finished == rules.servers.size()) return true;
                for (std::size_t i = 0; i < rules.servers.size(); ++i)
                    if (matched(i)) return true;
                return false;
            });
            answers = board->answers;  // late answers land on the board, no longer read
        }
        std::string failures;
        bool found = false;
        for (std::size_t i = 0; i < rules.servers.size() && !found; ++i) {
            const auto& s = rules.servers[i];
            const auto& a = answers[i];
            if (a && *a && s.pin.matches(**a)) {
                found = true;
                why += (why.empty() ? "" : "; ") + server_name(s) + " presented the certificate of --trusted-server " +
                       s.pin_text;
                break;
            }
            failures += failures.empty() ? "" : "; ";
            if (!a) failures += server_name(s) + " did not answer within " + std::to_string(budget.count()) + " ms";
            else if (!*a) failures += server_name(s) + ": " + a->error().message;
            else failures += server_name(s) + " presented " + (*a)->pin() + ", not " + s.pin_text;
        }
        if (!found) return {false, "untrusted network: " + failures};
    }
    return {true, "trusted network: " + why};
}

struct BackgroundTrustedCheck::Shared {
    io::CancelEvent done;
    std::atomic<bool> finished{false};
    mutable std::mutex mu;
    TrustedVerdict verdict;
};

namespace {

// The sockets around the tunnel, one pair per server, each taken once by its probe thread.
struct RouteBoard {
    std::mutex mu;
    std::vector<std::pair<std::string, io::TlsProbeRoute>> routes;  // keyed by server_name + pin
};

}  // namespace

BackgroundTrustedCheck::BackgroundTrustedCheck(const TrustedRules& rules, std::vector<io::TlsProbeRoute> routes,
                                               std::chrono::milliseconds budget)
    : shared_(std::make_shared<Shared>()) {
    auto board = std::make_shared<RouteBoard>();
    for (std::size_t i = 0; i < rules.servers.size() && i < routes.size(); ++i)
        board->routes.emplace_back(server_name(rules.servers[i]) + "," + rules.servers[i].pin_text, std::move(routes[i]));
    TrustedProbes probes;
    probes.read_resolv_conf = []() -> Result<std::string> {
        return make_error("the search domains are not read while a tunnel is up");
    };
    probes.fetch_certificate = [board](const TrustedServer& s,
                                       std::chrono::milliseconds bound) -> Result<io::ServerFingerprints> {
        io::TlsProbeRoute route;
        {
            std::lock_guard lock(board->mu);
            const std::string key = server_name(s) + "," + s.pin_text;
            for (auto& [k, r] : board->routes)
                if (k == key && r.given()) {
                    route = std::move(r);
                    break;
                }
        }
        if (!route.given()) return make_error("no socket around the tunnel");
        return io::probe_server_certificate(s.host, s.port, bound, std::move(route));
    };
    TrustedRules servers_only;
    servers_only.servers = rules.servers;
    std::thread([shared = shared_, servers_only, probes, budget] {
        TrustedVerdict v = detect_trusted_network(servers_only, probes, budget);
        {
            std::lock_guard lock(shared->mu);
            shared->verdict = std::move(v);
        }
        shared->finished = true;
        shared->done.cancel();
    }).detach();
}

int BackgroundTrustedCheck::done_fd() const { return shared_->done.fd(); }
bool BackgroundTrustedCheck::done() const { return shared_->finished; }

TrustedVerdict BackgroundTrustedCheck::verdict() const {
    std::lock_guard lock(shared_->mu);
    return shared_->verdict;
}

}  // namespace espvpn::session
