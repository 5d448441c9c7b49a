// CONNECT request and reply (fixtures captured from ocserv 1.1.6) and CSTP framing.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "protocols/anyconnect/connect.h"
#include "protocols/anyconnect/cstp.h"
#include "protocols/http/response_parser.h"
#include "protocols/anyconnect/tunnel_mtu.h"

using namespace espvpn;
using namespace espvpn::anyconnect;

namespace {

http::Response response_from(const std::string& text) {
    http::ResponseParser p;
    p.begin("CONNECT");
    auto used = p.feed(text);
    REQUIRE_MESSAGE(used.ok(), used.error().message);
    REQUIRE(p.done());
    return p.take_response();
}

http::Response fixture(const std::string& name) {
    std::ifstream in(std::string(AC_FIXTURE_DIR) + "/" + name, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "missing fixture " << name);
    std::ostringstream s;
    s << in.rdbuf();
    return response_from(s.str());
}

std::string reply_error(const std::string& headers) {
    auto r = parse_connect_reply(response_from("HTTP/1.1 200 CONNECTED\r\n" + headers + "\r\n"));
    REQUIRE_FALSE(r.ok());
    return r.error().message;
}

}  // namespace

TEST_CASE("CONNECT request headers") {
    AcConnectSettings s;
    s.host = "10.201.0.1";
    s.port = 4443;
    s.user_agent = "Open AnyConnect VPN Agent v9.01-3";
    s.hostname = "client1";
    s.base_mtu = 1500;
    s.mtu = requested_tunnel_mtu(1500, false);
    CHECK(s.mtu == 1390);
    AcDtlsOffer offer;
    offer.master_secret = Secret(48);
    s.dtls = std::move(offer);
    auto req = build_connect_request(s, Secret::from_string("abc="));
    REQUIRE(req.ok());
    std::string_view t = req->reveal_text();
    CHECK(t.rfind("CONNECT /CSCOSSLC/tunnel HTTP/1.1\r\nHost: 10.201.0.1:4443\r\n", 0) == 0);
    CHECK(t.find("Cookie: webvpn=abc=\r\n") != std::string_view::npos);
    CHECK(t.find("X-CSTP-Version: 1\r\n") != std::string_view::npos);
    CHECK(t.find("X-CSTP-Hostname: client1\r\n") != std::string_view::npos);
    CHECK(t.find("X-CSTP-Base-MTU: 1500\r\nX-CSTP-MTU: 1390\r\n") != std::string_view::npos);
    CHECK(t.find("X-CSTP-Address-Type: IPv6,IPv4\r\n") != std::string_view::npos);
    CHECK(t.find("X-CSTP-Full-IPv6-Capability: true\r\n") != std::string_view::npos);
    CHECK(t.find("X-DTLS-Master-Secret: " + std::string(96, '0') + "\r\n") != std::string_view::npos);
    CHECK(t.find("X-DTLS-CipherSuite: PSK-NEGOTIATE:") != std::string_view::npos);
    CHECK(t.find("X-DTLS12-CipherSuite: ") != std::string_view::npos);
    CHECK(t.find("Content-Length") == std::string_view::npos);
    CHECK(t.substr(t.size() - 4) == "\r\n\r\n");

    s.dtls.reset();
    s.ipv6 = false;
    s.previous_ipv4 = "192.168.99.5";
    auto plain = build_connect_request(s, Secret::from_string("abc="));
    REQUIRE(plain.ok());
    t = plain->reveal_text();
    CHECK(t.find("X-DTLS") == std::string_view::npos);
    CHECK(t.find("X-CSTP-Address-Type: IPv4\r\n") != std::string_view::npos);
    CHECK(t.find("Full-IPv6") == std::string_view::npos);
    CHECK(t.find("X-CSTP-Address: 192.168.99.5\r\n") != std::string_view::npos);

    AcDtlsOffer short_secret;
    short_secret.master_secret = Secret(47);
    s.dtls = std::move(short_secret);
    CHECK_FALSE(build_connect_request(s, Secret::from_string("x")).ok());
}

TEST_CASE("ocserv reply, PSK mode") {
    AcConnectRefusal refusal;
    auto c = parse_connect_reply(fixture("ocserv_connect_psk.txt"), &refusal);
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    CHECK(refusal.status == 200);
    CHECK(c->tunnel.ip4_address == "192.168.99.121");
    CHECK(c->tunnel.ip4_netmask == "255.255.255.0");
    CHECK(c->tunnel.ip6_address.empty());
    CHECK(c->tunnel.dns == std::vector<std::string>{"192.168.99.1"});
    CHECK(c->tunnel.default_domain == "example.test");
    CHECK(c->tunnel.split_dns == std::vector<std::string>{"example.test"});
    REQUIRE(c->tunnel.split_include.size() == 1);  // sent as 10.202.0.0/255.255.255.0
    CHECK(c->tunnel.split_include[0].to_string() == "10.202.0.0/24");
    REQUIRE(c->tunnel.split_exclude.size() == 1);  // sent as 10.202.0.128/255.255.255.128
    CHECK(c->tunnel.split_exclude[0].to_string() == "10.202.0.128/25");
    CHECK(c->tunnel.mtu == 1434);
    CHECK(c->cstp_mtu == 1434);
    CHECK(c->base_mtu == 1500);
    CHECK(c->dpd_s == 10);
    CHECK(c->keepalive_s == 300);
    CHECK(c->tunnel.idle_timeout_s == 0);
    CHECK(c->session_timeout_s == 0);
    CHECK(c->rekey_s == 172786);
    CHECK(c->rekey_method == "ssl");
    CHECK(c->tunnel.banner == "Hello from test ocserv");
    CHECK(c->tunnel.protocol_options.size() == 27);
    CHECK(c->tunnel.protocol_options[0].first == "X-CSTP-Version");
    REQUIRE(c->dtls.has_value());
    CHECK(c->dtls->mode == AcDtlsParams::Mode::psk);
    CHECK(c->dtls->cipher_suite == "PSK-NEGOTIATE");
    CHECK(c->dtls->port == 4443);
    CHECK(c->dtls->dpd_s == 10);
    CHECK(c->dtls->keepalive_s == 300);
    CHECK(c->dtls->rekey_s == 172796);
    CHECK(c->dtls->rekey_method == "ssl");
    CHECK(c->dtls->mtu == 0);
    CHECK(c->dtls->session_id[0] == 0x41);
    CHECK(c->dtls->session_id[31] == 0x8f);
}

TEST_CASE("ocserv reply, legacy DTLS mode") {
    auto c = parse_connect_reply(fixture("ocserv_connect_legacy.txt"));
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    REQUIRE(c->dtls.has_value());
    CHECK(c->dtls->mode == AcDtlsParams::Mode::legacy);
    CHECK(c->dtls->cipher_suite == "AES256-SHA");
    CHECK(c->dtls->mtu == 1406);
    CHECK(c->dtls->session_id[0] == 0x79);
    CHECK(c->tunnel.mtu == 1406);
}

TEST_CASE("reply variants and refusals") {
    auto r = parse_connect_reply(response_from(
        "HTTP/1.1 200 CONNECTED\r\nX-CSTP-Address: 10.0.0.2\r\nX-CSTP-Address-IP6: fd00::2/64\r\n"
        "X-CSTP-DNS: 10.0.0.1\r\nX-CSTP-DNS: fd00::1\r\nX-CSTP-DNS: 10.0.0.3\r\nX-CSTP-DNS: 10.0.0.4\r\n"
        "X-CSTP-DNS: 10.0.0.5\r\nX-CSTP-Split-Include-IP6: fd00:1::/48\r\nX-CSTP-Split-Include: 10.1.0.0/16\r\n"
        "X-CSTP-MTU: 1300\r\nX-CSTP-Session-Timeout: 0\r\nX-CSTP-Lease-Duration: 600\r\n"
        "X-CSTP-Session-Timeout-Remaining: 500\r\nX-DTLS-Session-ID: 00\r\n\r\n"));
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    CHECK(r->tunnel.ip6_address == "fd00::2");
    CHECK(r->tunnel.ip6_prefix == 64);
    CHECK(r->tunnel.dns == std::vector<std::string>{"10.0.0.1", "fd00::1", "10.0.0.3", "10.0.0.4"});
    REQUIRE(r->tunnel.split_include.size() == 2);
    CHECK(r->tunnel.split_include[0].to_string() == "fd00:1::/48");
    CHECK(r->tunnel.split_include[1].to_string() == "10.1.0.0/16");
    CHECK(r->session_timeout_s == 500);
    CHECK_FALSE(r->dtls.has_value());
    CHECK(r->dtls_unusable.find("64 hex digits") != std::string::npos);

    AcConnectRefusal refusal;
    auto rejected = parse_connect_reply(response_from("HTTP/1.1 401 Cookie is not acceptable\r\nContent-Length: 0\r\n\r\n"),
                                        &refusal);
    REQUIRE_FALSE(rejected.ok());
    CHECK(refusal.cookie_rejected());
    CHECK(rejected.error().message.find("401 Cookie is not acceptable") != std::string::npos);
    auto unavailable = parse_connect_reply(response_from(
        "HTTP/1.1 503 Service Unavailable\r\nX-Reason: Server configuration error\r\nContent-Length: 0\r\n\r\n"),
        &refusal);
    REQUIRE_FALSE(unavailable.ok());
    CHECK_FALSE(refusal.cookie_rejected());
    CHECK(unavailable.error().message.find("Server configuration error") != std::string::npos);

    CHECK(reply_error("X-CSTP-MTU: 1400\r\n").find("no tunnel address") != std::string::npos);
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\n").find("no MTU") != std::string::npos);
    CHECK(reply_error("X-CSTP-Address: 10.0.0.256\r\nX-CSTP-MTU: 1400\r\n").find("X-CSTP-Address") != std::string::npos);
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: big\r\n").find("X-CSTP-MTU") != std::string::npos);
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 100000\r\n") == "X-CSTP-MTU is 100000, expected 576..9000");
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 100\r\n") == "X-CSTP-MTU is 100, expected 576..9000");
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 1400\r\nX-DTLS-MTU: 70000\r\n") ==
          "X-DTLS-MTU is 70000, expected 576..9000");
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 1400\r\nX-CSTP-Split-Include: 10.0.0.0/33\r\n")
              .find("X-CSTP-Split-Include: route '10.0.0.0/33': prefix length over 32") != std::string::npos);
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 1400\r\nX-CSTP-Split-Exclude: 10.0.0.0/255.0.255.0\r\n")
              .find("netmask is not contiguous") != std::string::npos);
    CHECK(reply_error("X-CSTP-Address: 10.0.0.2\r\nX-CSTP-MTU: 1400\r\nX-CSTP-Content-Encoding: lzs\r\n")
              .find("compression") != std::string::npos);
}

TEST_CASE("CSTP framing: headers, logout packet") {
    auto h = cstp_header(CstpType::data, 0x1234);
    CHECK(h == CstpHeader{'S', 'T', 'F', 1, 0x12, 0x34, 0, 0});
    auto bye = cstp_logout_packet("Aborted by caller");
    REQUIRE(bye.size() == 8 + 1 + 17);
    CHECK(bye[5] == 18);
    CHECK(bye[6] == 5);
    CHECK(bye[8] == 0xb0);
    CHECK(bye[9] == 'A');
}

TEST_CASE("CSTP decoder: whole, split byte by byte, several per input") {
    std::vector<std::uint8_t> stream;
    auto add = [&](CstpType t, std::vector<std::uint8_t> payload) {
        auto hh = cstp_header(t, static_cast<std::uint16_t>(payload.size()));
        stream.insert(stream.end(), hh.begin(), hh.end());
        stream.insert(stream.end(), payload.begin(), payload.end());
    };
    add(CstpType::data, {0x45, 1, 2, 3});
    add(CstpType::dpd_request, {});
    add(CstpType::keepalive, {});
    add(CstpType::data, std::vector<std::uint8_t>(1500, 0x60));
    add(CstpType::disconnect, {0xb0, 'x'});

    auto collect = [&](std::size_t chunk) {
        CstpDecoder dec;
        std::vector<std::pair<CstpType, std::size_t>> got;
        for (std::size_t off = 0; off < stream.size(); off += chunk) {
            std::span<const std::uint8_t> in(stream.data() + off, std::min(chunk, stream.size() - off));
            while (true) {
                auto p = dec.next(in);
                REQUIRE(p.ok());
                if (!*p) break;
                got.emplace_back((*p)->type, (*p)->payload.size());
                if ((*p)->type == CstpType::data && (*p)->payload.size() == 4) CHECK((*p)->payload[0] == 0x45);
            }
        }
        CHECK(dec.pending() == 0);
        return got;
    };
    std::vector<std::pair<CstpType, std::size_t>> want{{CstpType::data, 4},
                                                       {CstpType::dpd_request, 0},
                                                       {CstpType::keepalive, 0},
                                                       {CstpType::data, 1500},
                                                       {CstpType::disconnect, 2}};
    CHECK(collect(stream.size()) == want);
    CHECK(collect(1) == want);
    CHECK(collect(7) == want);
    CHECK(collect(1000) == want);
}

TEST_CASE("CSTP decoder: bad packets are fatal") {
    auto fails = [](std::vector<std::uint8_t> bytes, const char* what) {
        CstpDecoder dec(2000);
        std::span<const std::uint8_t> in(bytes);
        auto r = dec.next(in);
        REQUIRE_FALSE(r.ok());
        CHECK_MESSAGE(r.error().message.find(what) != std::string::npos, r.error().message);
        CHECK(dec.failed());
        std::vector<std::uint8_t> good{'S', 'T', 'F', 1, 0, 0, 7, 0};
        std::span<const std::uint8_t> again(good);
        CHECK_FALSE(dec.next(again).ok());
    };
    fails({'S', 'T', 'G', 1, 0, 0, 0, 0}, "magic");
    fails({'S', 'T', 'F', 1, 0, 0, 0, 1}, "byte 7");
    fails({'S', 'T', 'F', 1, 0, 4, 8, 0, 1, 2, 3, 4}, "compressed");
    fails({'S', 'T', 'F', 1, 0, 0, 0x42, 0}, "unknown type 66");
    fails({'S', 'T', 'F', 1, 0x10, 0, 0, 0}, "exceeds the limit");
}

TEST_CASE("rekey methods: the three known names, absent = none, anything else named") {
    CHECK(*parse_rekey_method("ssl") == AcRekeyMethod::ssl);
    CHECK(*parse_rekey_method("new-tunnel") == AcRekeyMethod::new_tunnel);
    CHECK(*parse_rekey_method("none") == AcRekeyMethod::none);
    CHECK(*parse_rekey_method("") == AcRekeyMethod::none);
    auto bad = parse_rekey_method("SSL-renegotiate");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find("SSL-renegotiate") != std::string::npos);
    CHECK(std::string(rekey_method_name(AcRekeyMethod::new_tunnel)) == "new-tunnel");
}

TEST_CASE("ocserv reply: rekey time and method of both channels, parsed") {
    auto c = parse_connect_reply(fixture("ocserv_connect_psk.txt"));
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    CHECK(c->rekey == AcRekeyMethod::ssl);
    REQUIRE(c->dtls.has_value());
    CHECK(c->dtls->rekey == AcRekeyMethod::ssl);
}

TEST_CASE("reply: new-tunnel, none, and an unknown method kept as text but not acted on") {
    auto parse = [](const std::string& method) {
        auto r = parse_connect_reply(response_from("HTTP/1.1 200 CONNECTED\r\nX-CSTP-Address: 192.168.99.5\r\n"
                                                   "X-CSTP-MTU: 1400\r\nX-CSTP-Rekey-Time: 30\r\n"
                                                   "X-CSTP-Rekey-Method: " + method + "\r\n\r\n"));
        REQUIRE_MESSAGE(r.ok(), r.error().message);
        CHECK(r->rekey_s == 30);
        return *r;
    };
    CHECK(parse("new-tunnel").rekey == AcRekeyMethod::new_tunnel);
    CHECK(parse("none").rekey == AcRekeyMethod::none);
    auto odd = parse("quantum");
    CHECK(odd.rekey == AcRekeyMethod::none);
    CHECK(odd.rekey_method == "quantum");
}
