#include <doctest/doctest.h>

#include <sys/socket.h>

#include <csignal>

#include "protocols/broker/broker_message.h"

using namespace espvpn;
using namespace espvpn::broker;
using Bytes = std::vector<std::uint8_t>;

namespace {

TunnelConfig sample_config() {
    TunnelConfig c;
    c.gateway_address = "192.0.2.1";
    c.ip4_address = "10.201.0.5";
    c.ip4_netmask = "255.255.255.255";
    c.ip6_address = "fd00::5";
    c.ip6_prefix = 64;
    c.mtu = 1400;
    c.dns = {"10.0.0.53", "fd00::53"};
    c.default_domain = "corp.example.com lab.example.com";
    c.split_dns = {"corp.example.com"};
    c.banner = "Welcome\nto the lab\t(authorised use only)";
    c.idle_timeout_s = 3600;
    c.split_include = {*IpPrefix::parse("10.0.0.0/8"), *IpPrefix::parse("fd00::/16")};
    c.split_exclude = {*IpPrefix::parse("10.9.0.0/16")};
    c.split_include_domains = {*SplitDomain::parse("*.corp.example.com:443")};
    c.split_exclude_domains = {*SplitDomain::parse("www.example.com")};
    c.protocol_options = {{"X-CSTP-Keepalive", "20"}};
    return c;
}

Bytes roundtrip(const Message& m) {
    Bytes wire = encode(m);
    auto back = decode(wire);
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
    CHECK(type_of(*back) == type_of(m));
    CHECK(encode(*back) == wire);
    return wire;
}

// A request with one field replaced: the encoding of `m` with bytes [at, at+len) swapped for `with`.
Bytes patched(const Message& m, std::size_t at, std::size_t len, const Bytes& with) {
    Bytes wire = encode(m);
    wire.erase(wire.begin() + static_cast<std::ptrdiff_t>(at), wire.begin() + static_cast<std::ptrdiff_t>(at + len));
    wire.insert(wire.begin() + static_cast<std::ptrdiff_t>(at), with.begin(), with.end());
    return wire;
}

Bytes str_field(std::string_view s) {
    Bytes b = {0, 0, 0, static_cast<std::uint8_t>(s.size())};
    for (char c : s) b.push_back(static_cast<std::uint8_t>(c));
    return b;
}

std::string error_of(const Bytes& wire) {
    auto m = decode(wire);
    return m.ok() ? std::string("(decoded)") : m.error().message;
}

std::string error_text(const Status& s) { return s.ok() ? std::string() : s.error().message; }

}  // namespace

TEST_CASE("broker messages: every type encodes, decodes and re-encodes to the same bytes") {
    BringUp b{sample_config(), 1400, {{"192.0.2.10", 443}, {"2001:db8::10", 8443}}};
    Bytes wire = roundtrip(b);
    auto back = std::get<BringUp>(*decode(wire));
    CHECK(back.config.split_include == b.config.split_include);
    CHECK(back.config.split_include_domains == b.config.split_include_domains);
    CHECK(back.config.banner == b.config.banner);
    CHECK(back.config.dns == b.config.dns);
    CHECK(back.login_servers == b.login_servers);
    CHECK(back.mtu == 1400);

    roundtrip(RunScript{ScriptReason::connect});
    roundtrip(QueueScript{ScriptReason::reconnect});
    roundtrip(TearDown{});
    CHECK(std::get<TearDown>(*decode(roundtrip(TearDown{true}))).hold_kill_switch);
    CHECK(std::get<OpenCaptiveException>(*decode(roundtrip(OpenCaptiveException{3}))).seconds == 3);
    CHECK(std::get<OpenProbeSocket>(*decode(roundtrip(OpenProbeSocket{AF_INET6}))).family == AF_INET6);
    roundtrip(Reply{Type::open_captive_exception, true, "TCP 80/443 to any address", 0, {}});
    roundtrip(Reply{Type::open_probe_socket, true, "", 0, {}});
    // The exception is bounded: 1 s .. 1 h.
    for (int bad : {0, -5, kMaxCaptiveSeconds + 1}) {
        Bytes wire = encode(OpenCaptiveException{300});
        const auto v = static_cast<std::uint32_t>(bad);
        wire[4] = static_cast<std::uint8_t>(v >> 24);
        wire[5] = static_cast<std::uint8_t>(v >> 16);
        wire[6] = static_cast<std::uint8_t>(v >> 8);
        wire[7] = static_cast<std::uint8_t>(v);
        CHECK(error_of(wire).find("exception seconds") != std::string::npos);
    }
    CHECK_FALSE(decode(patched(OpenProbeSocket{AF_INET}, 4, 1, {5})).ok());
    roundtrip(AddDomainRoute{*IpPrefix::parse("198.51.100.7"), true});
    roundtrip(RemoveDomainRoute{*IpPrefix::parse("2001:db8::7"), false});
    roundtrip(PointDnsAt{"10.201.0.5"});
    roundtrip(PointDnsAt{""});
    roundtrip(SetMtu{1300});
    auto udp = std::get<OpenUdp>(*decode(roundtrip(OpenUdp{AF_INET6, 4 << 20, 8 << 20})));
    CHECK(udp.family == AF_INET6);
    CHECK(udp.receive_buffer == 8 << 20);
    roundtrip(OpenDnsListener{"10.201.0.5", 53, "tun0"});
    roundtrip(ReadState{"/var/lib/espvpn/token"});
    roundtrip(WriteState{"/var/lib/espvpn/token", {1, 2, 0, 255}, true, 0600});
    auto ws = std::get<WriteState>(*decode(roundtrip(WriteState{"/tmp/stats.json", {'{', '}'}, false, 0644})));
    CHECK_FALSE(ws.sync);
    CHECK(ws.mode == 0644);
    // A setuid bit is no mode for a state file.
    Bytes setuid = encode(WriteState{"/tmp/s", {}, true, 0600});
    setuid[setuid.size() - 2] = 0x08;  // 04000 | 0600 in the last four bytes
    CHECK(error_of(setuid).find("file mode") != std::string::npos);
    roundtrip(RemoveState{"/var/cache/espvpn/cookie"});
    roundtrip(Reply{Type::add_domain_route, true, "dev tun0", 3, {}});
    roundtrip(Reply{Type::read_state, true, "", 0, {'x', 'y'}});
    roundtrip(TunReply{true, "", "tun0", 7, true, 0x1f, true, 1400});
    roundtrip(TunReply{false, "TUNSETIFF: Operation not permitted", "", 0, false, 0, false, 0});
    roundtrip(SignalEvent{SIGTERM});
    auto st = std::get<StateReply>(*decode(roundtrip(StateReply{Type::read_state, true, "", true, 1000, 1000, 0600, {'k'}})));
    CHECK(st.found);
    CHECK(st.uid == 1000);
    CHECK(st.mode == 0600);
    roundtrip(StateReply{Type::remove_state, true, "", false, 0, 0, 0, {}});
    // Only read_state and remove_state get one; a mode is permission bits.
    CHECK_FALSE(decode(patched(StateReply{Type::read_state, true, "", true, 0, 0, 0600, {}}, 4, 2, {0, 12})).ok());
    CHECK(error_of(patched(StateReply{Type::read_state, true, "", true, 0, 0, 0600, {}}, 20, 4, {0, 0, 0x10, 0}))
              .find("mode") != std::string::npos);
}

TEST_CASE("broker messages: truncation at any byte and trailing bytes are errors") {
    const Bytes wire = encode(BringUp{sample_config(), 1400, {{"192.0.2.10", 443}}});
    for (std::size_t n = 0; n < wire.size(); ++n) {
        CHECK_FALSE(decode(std::span(wire.data(), n)).ok());
    }
    Bytes longer = wire;
    longer.push_back(0);
    CHECK(error_of(longer).find("bytes after the last field") != std::string::npos);
}

TEST_CASE("broker messages: version, type and size are checked") {
    Bytes wire = encode(TearDown{});
    wire[1] = 2;  // version 2
    CHECK(error_of(wire).find("version 2") != std::string::npos);
    wire = encode(TearDown{});
    wire[3] = 99;
    CHECK(error_of(wire).find("unknown type 99") != std::string::npos);
    Bytes huge(kMaxMessage + 1, 0);
    CHECK_FALSE(decode(huge).ok());
}

TEST_CASE("broker messages: fields are validated") {
    // Interface names: no slash, no space, at most 15 bytes.
    for (std::string_view bad : {"../etc", "tun 0", "tun0123456789abcd", "", ".."}) {
        Bytes wire = encode(OpenDnsListener{"10.0.0.1", 53, "tun0"});
        // version+type (4) + address (4+8) + port (4) → device string at 20
        wire = patched(OpenDnsListener{"10.0.0.1", 53, "tun0"}, 20, 8, str_field(bad));
        if (bad.empty()) CHECK(decode(wire).ok());  // "": no device
        else CHECK(error_of(wire).find("listener device") != std::string::npos);
    }
    // Prefixes only in canonical form; host bits set are refused, garbage too.
    for (std::string_view bad : {"10.1.2.3/16", "10.0.0.0/33", "banana", "10.0.0.0/8\n"}) {
        Bytes wire = patched(AddDomainRoute{*IpPrefix::parse("10.0.0.0/8"), true}, 4, 14, str_field(bad));
        CHECK(error_of(wire).find("domain route") != std::string::npos);
    }
    // Addresses: numeric only.
    CHECK(error_of(patched(PointDnsAt{"10.0.0.1"}, 4, 12, str_field("evil.example"))).find("DNS forwarder") !=
          std::string::npos);
    // Enums in range.
    CHECK(error_of(patched(RunScript{ScriptReason::connect}, 4, 1, {5})).find("script reason") != std::string::npos);
    CHECK(error_of(patched(AddDomainRoute{*IpPrefix::parse("10.0.0.0/8"), true}, 18, 1, {2})).find("boolean") !=
          std::string::npos);
    // Paths: absolute, no control characters.
    CHECK(error_of(patched(ReadState{"/a"}, 4, 6, str_field("relative"))).find("absolute") != std::string::npos);
    CHECK(error_of(patched(ReadState{"/a"}, 4, 6, str_field("/a\nb"))).find("control") != std::string::npos);
    // Only the forwarded signals.
    Bytes sig = encode(SignalEvent{SIGTERM});
    sig[7] = SIGKILL;
    CHECK(error_of(sig).find("not forwarded") != std::string::npos);
    // Bounded sizes and ranges.
    CHECK(error_of(patched(SetMtu{1300}, 4, 4, {0, 0, 0, 10})).find("MTU") != std::string::npos);
    CHECK(error_of(patched(OpenUdp{AF_INET, 1, 1}, 4, 1, {5})).find("family") != std::string::npos);
    CHECK(error_of(patched(OpenUdp{AF_INET, 1, 1}, 5, 4, {0x7f, 0, 0, 0})).find("send buffer") != std::string::npos);
    CHECK(error_of(patched(ReadState{"/a"}, 4, 6, {0xff, 0xff, 0xff, 0xff})).find("longer than") != std::string::npos);
    // A DNS server in the configuration that is a name, not an address.
    TunnelConfig c = sample_config();
    c.dns = {"ns.example.com"};
    CHECK(error_of(encode(BringUp{c, 1400, {}})).find("DNS server") != std::string::npos);
    c = sample_config();
    c.ip4_netmask = "255.0.255.0";
    CHECK(error_of(encode(BringUp{c, 1400, {}})).find("netmask") != std::string::npos);
    c = sample_config();
    c.banner = std::string("a\0b", 3);
    CHECK(error_of(encode(BringUp{c, 1400, {}})).find("NUL") != std::string::npos);
}

TEST_CASE("broker state: requests out of order are refused") {
    BrokerState s;
    CHECK_FALSE(s.admit(Type::add_domain_route).ok());
    CHECK_FALSE(s.admit(Type::run_script).ok());
    CHECK(s.admit(Type::open_udp).ok());
    CHECK(s.admit(Type::read_state).ok());
    CHECK_FALSE(s.admit(Type::reply).ok());
    CHECK_FALSE(s.admit(Type::signal_event).ok());
    CHECK_FALSE(s.admit(Type::state_reply).ok());
    REQUIRE(s.admit(Type::bring_up).ok());
    s.after(Type::bring_up, true);
    CHECK(s.up());
    CHECK_FALSE(s.admit(Type::bring_up).ok());
    CHECK(s.admit(Type::add_domain_route).ok());
    CHECK(s.admit(Type::set_mtu).ok());
    s.after(Type::tear_down, true);
    CHECK_FALSE(s.admit(Type::tear_down).ok());
    CHECK_FALSE(s.admit(Type::point_dns_at).ok());
    CHECK(s.admit(Type::write_state).ok());  // the last stats / token write after the tunnel
    // --always-on: the next session brings up a new tun after the tear-down, and after a failed bring-up.
    CHECK(s.admit(Type::bring_up).ok());
    s.after(Type::bring_up, true);
    CHECK(s.up());
    CHECK_FALSE(s.admit(Type::bring_up).ok());
    // A captive portal: only after a tear-down that held the kill switch, once; its probe's
    // socket while the host is up or the kill switch held.
    CHECK_FALSE(s.admit(Type::open_captive_exception).ok());
    CHECK(s.admit(Type::open_probe_socket).ok());
    s.after(Type::tear_down, true, true);
    CHECK(s.captive());
    CHECK(s.admit(Type::open_probe_socket).ok());
    REQUIRE(s.admit(Type::open_captive_exception).ok());
    s.after(Type::open_captive_exception, true);
    CHECK(error_text(s.admit(Type::open_captive_exception)).find("twice") != std::string::npos);
    CHECK(s.admit(Type::bring_up).ok());
    s.after(Type::bring_up, true);
    CHECK_FALSE(s.captive());
    CHECK_FALSE(s.admit(Type::open_captive_exception).ok());
    s.after(Type::tear_down, true, false);  // an ordinary tear-down (or no kill switch to hold)
    CHECK_FALSE(s.admit(Type::open_captive_exception).ok());
    CHECK_FALSE(s.admit(Type::open_probe_socket).ok());
    s.after(Type::bring_up, true);
    s.after(Type::tear_down, true, true);  // the next portal: its own exception
    CHECK(s.admit(Type::open_captive_exception).ok());
    BrokerState failed;
    failed.after(Type::bring_up, false);
    CHECK_FALSE(failed.up());
    CHECK_FALSE(failed.admit(Type::run_script).ok());
    CHECK(failed.admit(Type::bring_up).ok());
}
