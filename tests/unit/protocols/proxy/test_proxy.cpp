// protocols/proxy: --proxy URLs, no_proxy, HTTP CONNECT and SOCKS5 messages.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocols/proxy/proxy.h"

using namespace espvpn;
using namespace espvpn::proxy;

namespace {

std::span<const std::uint8_t> bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string text(const Secret& s) { return std::string(s.reveal_text()); }

}  // namespace

TEST_CASE("proxy URL: schemes, default ports, credentials, IPv6, openconnect's bare host:port") {
    auto a = parse_proxy_url("http://proxy.test:3128/");
    REQUIRE(a);
    CHECK(a->kind == ProxyKind::http);
    CHECK(a->host == "proxy.test");
    CHECK(a->port == 3128);
    CHECK(a->user.empty());
    CHECK(a->display() == "http://proxy.test:3128/");

    auto b = parse_proxy_url("HTTP://alice:p%40ss:w@Proxy.Test");
    REQUIRE(b);
    CHECK(b->port == 80);
    CHECK(b->host == "proxy.test");
    CHECK(b->user == "alice");
    CHECK(b->password.reveal_text() == "p@ss:w");
    CHECK(b->display().find("p@ss") == std::string::npos);

    auto c = parse_proxy_url("socks5://[fd00::1]:1081");
    REQUIRE(c);
    CHECK(c->kind == ProxyKind::socks5);
    CHECK(c->host == "fd00::1");
    CHECK(c->port == 1081);
    CHECK(c->display() == "socks5://[fd00::1]:1081/");
    CHECK(parse_proxy_url("socks://s.test")->port == 1080);

    auto slash = parse_proxy_url("http://u:a/b@p.test/");
    REQUIRE(slash);
    CHECK(slash->password.reveal_text() == "a/b");

    auto d = parse_proxy_url("10.0.0.1:8080");
    REQUIRE(d);
    CHECK(d->kind == ProxyKind::http);
    CHECK(d->port == 8080);
}

TEST_CASE("proxy URL: bad input is refused without echoing the password") {
    for (const char* bad : {"https://p.test/", "ftp://p.test", "http://", "http://p.test:0/", "http://p.test:99999",
                            "http://p.test:80/path", "http://:secretpw@p.test/", "http://u:secret/pw@p.test/x", "http://[::1", "http://p.test:x"}) {
        CAPTURE(bad);
        auto r = parse_proxy_url(bad);
        REQUIRE_FALSE(r);
        CHECK(r.error().message.find("secretpw") == std::string::npos);
    }
}

TEST_CASE("no_proxy: names, domain suffixes, IP literals, ports, '*'") {
    CHECK(bypasses_proxy("vpn.corp.test", "corp.test"));
    CHECK(bypasses_proxy("vpn.corp.test", ".corp.test"));
    CHECK(bypasses_proxy("VPN.corp.test", "other.test, CORP.test"));
    CHECK(bypasses_proxy("corp.test", ".corp.test"));
    CHECK_FALSE(bypasses_proxy("notcorp.test", "corp.test"));
    CHECK(bypasses_proxy("10.1.2.3", "localhost,10.1.2.3"));
    CHECK_FALSE(bypasses_proxy("110.1.2.3", "0.1.2.3"));
    CHECK(bypasses_proxy("vpn.test", "vpn.test:443"));
    CHECK(bypasses_proxy("fd00::1", "[fd00::1]:443"));
    CHECK(bypasses_proxy("anything", "*"));
    CHECK_FALSE(bypasses_proxy("vpn.test", ""));
}

TEST_CASE("--proxy-auth: espvpn answers Basic and NTLM; without the option NTLM and not Basic") {
    auto m = parse_proxy_auth("gssapi,Basic, ntlm");
    REQUIRE(m);
    CHECK(m->basic);
    CHECK(m->ntlm);
    CHECK(m->unsupported == std::vector<std::string>{"gssapi"});
    CHECK_FALSE(parse_proxy_auth("digest")->basic);
    CHECK_FALSE(parse_proxy_auth("digest")->ntlm);
    CHECK_FALSE(parse_proxy_auth("basic")->ntlm);
    const ProxyAuthMethods defaults;
    CHECK(defaults.ntlm);
    CHECK_FALSE(defaults.basic);
    CHECK_FALSE(parse_proxy_auth("kerberos"));
}

TEST_CASE("HTTP CONNECT request: target, Host, Basic credentials only when allowed") {
    auto spec = parse_proxy_url("http://alice:secret@p.test:3128/");
    REQUIRE(spec);
    std::string with = text(build_connect_request(*spec, "vpn.test", 443, true));
    CHECK(with.rfind("CONNECT vpn.test:443 HTTP/1.1\r\nHost: vpn.test:443\r\n", 0) == 0);
    CHECK(with.find("Proxy-Authorization: Basic YWxpY2U6c2VjcmV0\r\n") != std::string::npos);  // alice:secret
    CHECK(with.size() >= 4);
    CHECK(with.substr(with.size() - 4) == "\r\n\r\n");
    std::string without = text(build_connect_request(*spec, "fd00::1", 8443, false));
    CHECK(without.rfind("CONNECT [fd00::1]:8443 HTTP/1.1\r\n", 0) == 0);
    CHECK(without.find("Proxy-Authorization") == std::string::npos);
}

TEST_CASE("HTTP CONNECT reply: incomplete, 200, 407 with its schemes, garbage") {
    const std::string ok = "HTTP/1.1 200 Connection established\r\nProxy-agent: tinyproxy\r\n\r\n";
    for (std::size_t n = 0; n < ok.size(); ++n) {
        auto partial = parse_connect_reply(bytes(std::string_view(ok).substr(0, n)));
        REQUIRE(partial);
        CHECK_FALSE(*partial);
    }
    auto r = parse_connect_reply(bytes(ok));
    REQUIRE(r);
    REQUIRE(*r);
    CHECK((*r)->status == 200);
    CHECK((*r)->reason == "Connection established");
    CHECK((*r)->header_size == ok.size());

    auto denied = parse_connect_reply(bytes("HTTP/1.0 407 Proxy Authentication Required\r\n"
                                            "Proxy-Authenticate: Basic realm=\"tinyproxy\"\r\n"
                                            "proxy-authenticate:  NTLM\r\n\r\nbody"));
    REQUIRE(denied);
    REQUIRE(*denied);
    CHECK((*denied)->status == 407);
    CHECK((*denied)->authenticate == std::vector<std::string>{"Basic realm=\"tinyproxy\"", "NTLM"});

    CHECK_FALSE(parse_connect_reply(bytes("SSH-2.0-OpenSSH\r\n\r\n")));
    CHECK_FALSE(parse_connect_reply(bytes("HTTP/1.1 abc\r\n\r\n")));
    CHECK_FALSE(parse_connect_reply(bytes("HTTP/1.1 20\r\n\r\n")));
    CHECK_FALSE(parse_connect_reply(bytes(std::string(17000, 'H').insert(0, "HTTP/"))));
}

TEST_CASE("SOCKS5: greeting, method choice, RFC 1929 request and reply") {
    CHECK(socks5_greeting(false) == std::vector<std::uint8_t>{5, 1, 0});
    CHECK(socks5_greeting(true) == std::vector<std::uint8_t>{5, 2, 0, 2});
    const std::uint8_t no_auth[] = {5, 0}, user_pass[] = {5, 2}, none[] = {5, 0xff}, v4[] = {4, 0};
    CHECK(*parse_socks5_choice(no_auth, true) == kSocksNoAuth);
    CHECK(*parse_socks5_choice(user_pass, true) == kSocksUserPass);
    CHECK_FALSE(parse_socks5_choice(user_pass, false));  // not offered
    auto refused = parse_socks5_choice(none, false);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("requires authentication") != std::string::npos);
    CHECK_FALSE(parse_socks5_choice(v4, false));

    auto req = socks5_user_pass_request("bob", Secret::from_string("pw"));
    REQUIRE(req);
    const std::vector<std::uint8_t> want = {1, 3, 'b', 'o', 'b', 2, 'p', 'w'};
    CHECK(std::vector<std::uint8_t>(req->reveal().begin(), req->reveal().end()) == want);
    CHECK_FALSE(socks5_user_pass_request("", Secret::from_string("pw")));
    CHECK_FALSE(socks5_user_pass_request(std::string(256, 'u'), Secret::from_string("pw")));
    const std::uint8_t auth_ok[] = {1, 0}, auth_bad[] = {1, 1};
    CHECK(parse_socks5_auth_reply(auth_ok));
    auto bad = parse_socks5_auth_reply(auth_bad);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("refused the user name and password") != std::string::npos);
}

TEST_CASE("SOCKS5 CONNECT: address types out, reply lengths and refusal codes in") {
    CHECK(*socks5_connect_request("10.1.2.3", 443) == std::vector<std::uint8_t>{5, 1, 0, 1, 10, 1, 2, 3, 1, 187});
    auto name = socks5_connect_request("vpn.test", 4443);
    REQUIRE(name);
    CHECK(*name == std::vector<std::uint8_t>{5, 1, 0, 3, 8, 'v', 'p', 'n', '.', 't', 'e', 's', 't', 0x11, 0x5b});
    auto v6 = socks5_connect_request("::1", 443);
    REQUIRE(v6);
    CHECK(v6->size() == 4 + 16 + 2);
    CHECK((*v6)[3] == 4);
    CHECK_FALSE(socks5_connect_request(std::string(256, 'a'), 1));

    const std::vector<std::uint8_t> ok4 = {5, 0, 0, 1, 127, 0, 0, 1, 0x1f, 0x90};
    for (std::size_t n = 0; n < ok4.size(); ++n) {
        auto r = parse_socks5_connect_reply(std::span(ok4.data(), n));
        REQUIRE(r);
        CHECK_FALSE(r->complete);
        if (n >= 5) CHECK(r->needed == ok4.size());
    }
    auto done = parse_socks5_connect_reply(ok4);
    REQUIRE(done);
    CHECK(done->complete);
    const std::vector<std::uint8_t> ok_name = {5, 0, 0, 3, 3, 'a', 'b', 'c', 0, 80};
    CHECK(parse_socks5_connect_reply(ok_name)->complete);
    std::vector<std::uint8_t> extra = ok4;
    extra.push_back(0x16);
    CHECK_FALSE(parse_socks5_connect_reply(extra));

    const std::uint8_t refused[] = {5, 5};
    auto r = parse_socks5_connect_reply(refused);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("connection refused") != std::string::npos);
    const std::uint8_t ruleset[] = {5, 2, 0, 1};
    CHECK(parse_socks5_connect_reply(ruleset).error().message.find("ruleset") != std::string::npos);
    const std::uint8_t odd_type[] = {5, 0, 0, 9, 0};
    CHECK_FALSE(parse_socks5_connect_reply(odd_type));
}

TEST_CASE("CONNECT reply reader: a refusal's body is read so the connection can carry the next request") {
    const std::string keep =
        "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: NTLM\r\nContent-Length: 5\r\n"
        "Connection: keep-alive\r\n\r\nabcde";
    ConnectReplyReader a;
    auto used = a.feed(bytes(keep.substr(0, 60)));
    REQUIRE(used);
    CHECK_FALSE(a.head_complete());
    REQUIRE(a.feed(bytes(keep.substr(60))));
    CHECK(a.head_complete());
    CHECK(a.done());
    CHECK(a.may_reuse());
    CHECK(a.reusable());
    auto r = a.reply();
    CHECK(r.status == 407);
    CHECK(r.authenticate == std::vector<std::string>{"NTLM"});
    CHECK(r.keep_alive);

    // Half the body: not reusable yet.
    ConnectReplyReader half;
    REQUIRE(half.feed(bytes(keep.substr(0, keep.size() - 2))));
    CHECK(half.may_reuse());
    CHECK_FALSE(half.reusable());

    // "close" in Connection or Proxy-Connection, or HTTP/1.0 without keep-alive: a new connection.
    for (std::string head : {"HTTP/1.1 407 X\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                             "HTTP/1.1 407 X\r\nProxy-Connection: close\r\nContent-Length: 0\r\n\r\n",
                             "HTTP/1.0 401 X\r\nContent-Length: 0\r\n\r\n"}) {
        ConnectReplyReader c;
        REQUIRE(c.feed(bytes(head)));
        CAPTURE(head);
        CHECK(c.head_complete());
        CHECK_FALSE(c.may_reuse());
        CHECK_FALSE(c.reusable());
    }
    // A close-delimited body ends at EOF, and the connection with it.
    ConnectReplyReader eof;
    REQUIRE(eof.feed(bytes("HTTP/1.1 407 X\r\n\r\nsome page")));
    CHECK_FALSE(eof.may_reuse());
    CHECK(eof.finish_eof());
    CHECK_FALSE(eof.reusable());

    // A 200 ends at the blank line: what follows is the tunnel's.
    const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01";
    ConnectReplyReader t;
    auto n = t.feed(bytes(ok));
    REQUIRE(n);
    CHECK(*n == ok.size() - 3);
    CHECK(t.done());
    // An oversized error page is an error, not unbounded memory.
    ConnectReplyReader big;
    CHECK_FALSE(big.feed(bytes("HTTP/1.1 407 X\r\nContent-Length: 99999999\r\n\r\n")));
}
