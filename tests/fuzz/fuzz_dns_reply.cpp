// libFuzzer target: DNS replies for the domain-based split tunnel. Control
// byte: bit 0 picks A or AAAA. The rest is the reply to a query for x.test
// (id taken from the reply itself, so the fuzzer reaches the records); what
// parses is fed to a DomainRouteTable of two rules and a bound of 8. The same bytes
// also go to the wildcard forwarder's side: read as a stub's query, answered SERVFAIL
// (which must not read as a query), and as the upstream answer to that query.
#include <chrono>

#include "protocols/dns/dns_message.h"
#include "protocols/dns/domain_route_table.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::InputReader in(data, size);
    const DnsType type = in.byte() & 1 ? DnsType::aaaa : DnsType::a;
    const auto msg = in.take(size);
    const std::uint16_t id = msg.size() >= 2 ? static_cast<std::uint16_t>(msg[0] << 8 | msg[1]) : 0;
    if (auto q = parse_dns_question(msg)) {
        if (auto sf = build_dns_servfail(*q); sf && parse_dns_question(*sf)) __builtin_trap();
        (void)wildcard_answer(msg, q->id, *q, {{"test", true, true}, {"", false, true}});
    }
    auto reply = parse_dns_reply(msg, id, "x.test", type);
    if (!reply.ok()) return 0;
    using namespace std::chrono_literals;
    const DomainRouteTable::Clock::time_point t0{};
    DomainRouteTable table({{"x.test", true}, {"y.test", false}}, {30s, 3600s, 8}, t0);
    (void)table.on_answer(0, type, reply->addresses, t0);
    (void)table.on_answer(1, type, reply->addresses, t0 + 1s);
    (void)table.expire(t0 + 3601s);
    if (!table.routes().empty()) __builtin_trap();
    return 0;
}
