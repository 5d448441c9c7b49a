#include <doctest/doctest.h>

#include <chrono>
#include <future>

#include "src/session/trusted_network.h"

using namespace espvpn;
using namespace espvpn::session;
using namespace std::chrono_literals;

namespace {

const std::string kPin = "pin-sha256:V57S6srHe5z5+IkCXC9qtQWkRmfEVBeXQNefGqbi4SU=";

io::ServerFingerprints fingerprints(std::string pin_sha256) {
    io::ServerFingerprints fp;
    fp.pin_sha256 = std::move(pin_sha256);
    return fp;
}

TrustedProbes probes(std::string resolv_conf, std::function<Result<io::ServerFingerprints>(const TrustedServer&)> f) {
    TrustedProbes p;
    p.read_resolv_conf = [text = std::move(resolv_conf)]() -> Result<std::string> { return text; };
    p.fetch_certificate = [f](const TrustedServer& s, std::chrono::milliseconds) { return f(s); };
    return p;
}

}  // namespace

TEST_CASE("trusted domains: resolv.conf's last search/domain line, case and trailing dots ignored") {
    CHECK(resolv_conf_domains("nameserver 10.0.0.1\nsearch Corp.Example. lab.example # comment\n") ==
          std::vector<std::string>{"corp.example", "lab.example"});
    CHECK(resolv_conf_domains("search a.example\ndomain b.example\n") == std::vector<std::string>{"b.example"});
    CHECK(resolv_conf_domains("# search x.example\nnameserver 127.0.0.53\n").empty());
    CHECK(domain_matches("corp.example", "corp.example"));
    CHECK(!domain_matches("corp.example", "evilcorp.example"));
    CHECK(!domain_matches("corp.example", "corp.example.attacker.net"));
    CHECK(domain_matches("*.example", "corp.example"));
    CHECK(!domain_matches("*.example", "example"));
    CHECK(!domain_matches("*.corp.example", "evilcorp.example"));
    CHECK(*parse_trusted_domain("Corp.Example.") == "corp.example");
    CHECK(!parse_trusted_domain(""));
    CHECK(!parse_trusted_domain("corp..example"));
    CHECK(!parse_trusted_domain("corp example"));
    CHECK(!parse_trusted_domain("*."));
}

TEST_CASE("trusted servers: HOST:PORT,PIN with a full-strength pin only") {
    auto s = parse_trusted_server("10.1.1.1:443," + kPin);
    REQUIRE(s);
    CHECK(s->host == "10.1.1.1");
    CHECK(s->port == 443);
    auto v6 = parse_trusted_server("[fd00::1]:8443," + kPin);
    REQUIRE(v6);
    CHECK(v6->host == "fd00::1");
    CHECK(v6->port == 8443);
    CHECK(parse_trusted_server("10.1.1.1:443").error().message.find("needs the server certificate's pin") !=
          std::string::npos);
    CHECK(parse_trusted_server("10.1.1.1:443,pin-sha256:V57S6s").error().message.find("give the whole digest") !=
          std::string::npos);
    CHECK(!parse_trusted_server("10.1.1.1," + kPin));
    CHECK(!parse_trusted_server("10.1.1.1:0," + kPin));
    CHECK(!parse_trusted_server("10.1.1.1:70000," + kPin));
    CHECK(!parse_trusted_server("fd00::1:443," + kPin));
    CHECK(!parse_trusted_server("10.1.1.1:443,md5:00"));
}

TEST_CASE("the verdict: every configured kind must hold, any entry of a kind will do") {
    TrustedRules rules;
    rules.domains = {"corp.example"};
    auto none = [](const TrustedServer&) -> Result<io::ServerFingerprints> { return make_error("not asked"); };
    CHECK(detect_trusted_network(rules, probes("search corp.example\n", none)).trusted);
    auto out = detect_trusted_network(rules, probes("search hotel.example\n", none));
    CHECK(!out.trusted);
    CHECK(out.reason == "untrusted network: no search domain matches --trusted-domain (/etc/resolv.conf: hotel.example)");

    rules.servers = {*parse_trusted_server("10.1.1.1:443," + kPin), *parse_trusted_server("10.1.1.2:443," + kPin)};
    const std::string good = kPin.substr(11);
    auto second = [&](const TrustedServer& s) -> Result<io::ServerFingerprints> {
        if (s.host == "10.1.1.2") return fingerprints(good);
        return make_error("cannot connect: Connection refused");
    };
    auto v = detect_trusted_network(rules, probes("search corp.example\n", second));
    CHECK(v.trusted);
    CHECK(v.reason == "trusted network: search domain corp.example matches --trusted-domain corp.example; 10.1.1.2:443 "
                      "presented the certificate of --trusted-server " + kPin);
    // The domain matches, the server does not: not trusted (both kinds are configured).
    auto wrong = [](const TrustedServer&) -> Result<io::ServerFingerprints> {
        return fingerprints("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    };
    v = detect_trusted_network(rules, probes("search corp.example\n", wrong));
    CHECK(!v.trusted);
    CHECK(v.reason.find("10.1.1.1:443 presented pin-sha256:AAAA") != std::string::npos);
    // The server matches, the domain does not: not trusted, and no server is asked.
    bool asked = false;
    auto note = [&](const TrustedServer&) -> Result<io::ServerFingerprints> {
        asked = true;
        return fingerprints(good);
    };
    CHECK(!detect_trusted_network(rules, probes("search hotel.example\n", note)).trusted);
    CHECK(!asked);
}

TEST_CASE("a server that never answers: not trusted when the bound ends") {
    TrustedRules rules;
    rules.servers = {*parse_trusted_server("10.9.9.9:443," + kPin)};
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    auto hang = [released](const TrustedServer&) -> Result<io::ServerFingerprints> {
        released.wait();
        return make_error("late");
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto v = detect_trusted_network(rules, probes("", hang), 100ms);
    const auto took = std::chrono::steady_clock::now() - t0;
    release.set_value();
    CHECK(!v.trusted);
    CHECK(v.reason == "untrusted network: 10.9.9.9:443 did not answer within 100 ms");
    CHECK(took < 30s);  // the bound, not the server, ended the wait
}
