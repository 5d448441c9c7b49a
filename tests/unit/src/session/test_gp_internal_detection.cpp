#include <doctest/doctest.h>

#include <chrono>
#include <future>

#include "src/session/gp/internal_detection.h"

using namespace espvpn;
using namespace espvpn::session;
using namespace std::chrono_literals;

namespace {

gp::GpInternalHostCheck check(std::string address, std::string host, bool v6 = false) {
    return {std::move(address), std::move(host), v6};
}

// A lookup that answers from a table; "10.9.9.9" blocks until `release` is set (a resolver
// that never answers while the caller waits).
struct FakeResolver {
    std::shared_future<void> released;
    ReverseLookup lookup() const {
        return [released = released](const std::string& a) -> Result<std::string> {
            if (a == "10.9.9.9") {
                released.wait();
                return std::string("late.corp.example");
            }
            if (a == "10.0.0.1") return std::string("GW.corp.example.");
            if (a == "fd00::1") return std::string("gw6.corp.example");
            if (a == "10.0.0.2") return std::string("printer.example");
            return make_error("Name or service not known");
        };
    }
};

}  // namespace

TEST_CASE("internal detection: the expected reverse name means inside, anything else outside") {
    std::promise<void> release;
    FakeResolver r{release.get_future().share()};

    auto in = detect_internal_network({check("10.0.0.1", "gw.corp.example")}, 30s, r.lookup());
    CHECK(in.inside);
    CHECK(in.reason == "inside the corporate network: 10.0.0.1 resolves to GW.corp.example.");

    auto other = detect_internal_network({check("10.0.0.2", "gw.corp.example")}, 30s, r.lookup());
    CHECK_FALSE(other.inside);
    CHECK(other.reason == "outside the corporate network: 10.0.0.2 resolves to printer.example, expected "
                          "gw.corp.example");

    auto none = detect_internal_network({check("10.0.0.3", "gw.corp.example")}, 30s, r.lookup());
    CHECK_FALSE(none.inside);
    CHECK(none.reason == "outside the corporate network: 10.0.0.3 has no name (Name or service not known), "
                         "expected gw.corp.example");

    // Either family decides: the IPv4 name is another host's, the IPv6 one matches.
    auto v6 = detect_internal_network(
        {check("10.0.0.2", "gw.corp.example"), check("fd00::1", "gw6.corp.example", true)}, 30s, r.lookup());
    CHECK(v6.inside);
    CHECK(v6.reason == "inside the corporate network: fd00::1 resolves to gw6.corp.example");
    release.set_value();
}

TEST_CASE("internal detection: a lookup that never answers is outside once the budget ends") {
    std::promise<void> release;
    FakeResolver r{release.get_future().share()};
    auto silent = detect_internal_network({check("10.9.9.9", "late.corp.example")}, 50ms, r.lookup());
    CHECK_FALSE(silent.inside);
    CHECK(silent.reason == "outside the corporate network: no answer for 10.9.9.9 within 50 ms");

    // A match does not wait for a silent lookup beside it (the budget here is far away).
    const auto start = std::chrono::steady_clock::now();
    auto early = detect_internal_network({check("10.9.9.9", "late.corp.example"), check("10.0.0.1", "gw.corp.example")},
                                         60s, r.lookup());
    CHECK(early.inside);
    CHECK(std::chrono::steady_clock::now() - start < 50s);
    release.set_value();  // the detached lookups end now; their board outlives this test
}

TEST_CASE("internal detection: the resolver lookup refuses what is not an IP address") {
    // (The lookup through NSS itself is tested against a private /etc/hosts and a silent
    // DNS server in tests/integration/gp_internal.)
    auto bad = resolver_reverse_lookup("not-an-address");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message == "not an IP address");
}
