// protocols/proxy: NTLM messages ([MS-NLMP], its section 4.2.4 NTLMv2 example) and the
// HTTP CONNECT authentication rounds (ConnectAuth).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocols/base/hex.h"
#include "protocols/proxy/connect_auth.h"
#include "protocols/proxy/ntlm.h"

using namespace espvpn;
using namespace espvpn::proxy;

namespace {

std::vector<std::uint8_t> unhex(std::string_view h) {
    auto s = Secret::from_hex(h);
    REQUIRE(s);
    return {s->reveal().begin(), s->reveal().end()};
}

std::string hexof(std::span<const std::uint8_t> b) {
    static const char* d = "0123456789abcdef";
    std::string out;
    for (auto c : b) {
        out.push_back(d[c >> 4]);
        out.push_back(d[c & 15]);
    }
    return out;
}

// [MS-NLMP] 4.2.4.3: the CHALLENGE_MESSAGE of the NTLMv2 example (server challenge
// 0123456789abcdef, target "Server", AV pairs NbDomainName "Domain", NbComputerName "Server").
const char* const kSpecChallenge =
    "4e544c4d53535000020000000c000c003800000033828ae20123456789abcdef00000000000000002400240044000000"
    "060070170000000f53006500720076006500720002000c0044006f006d00610069006e0001000c005300650072007600"
    "6500720000000000";

const std::uint8_t kClientChallenge[8] = {0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa};

std::uint16_t le16(const std::vector<std::uint8_t>& b, std::size_t at) {
    return static_cast<std::uint16_t>(b[at] | (b[at + 1] << 8));
}
std::uint32_t le32(const std::vector<std::uint8_t>& b, std::size_t at) {
    return le16(b, at) | (static_cast<std::uint32_t>(le16(b, at + 2)) << 16);
}
std::vector<std::uint8_t> field(const std::vector<std::uint8_t>& m, std::size_t at) {
    const std::size_t len = le16(m, at), off = le32(m, at + 4);
    REQUIRE(off + len <= m.size());
    return {m.begin() + static_cast<long>(off), m.begin() + static_cast<long>(off + len)};
}

}  // namespace

TEST_CASE("NTLM: NTOWFv2 and the NTLMv2 responses of [MS-NLMP] 4.2.4") {
    auto key = ntlm::ntowfv2(Secret::from_string("Password"), "User", "Domain");
    REQUIRE(key);
    CHECK(hexof(key->reveal()) == "0c868a403bfd7a93a3001ef22ef02e3f");
    // The user name is upper-cased, the domain is not: "user" gives the same key.
    CHECK(hexof(ntlm::ntowfv2(Secret::from_string("Password"), "user", "Domain")->reveal()) ==
          "0c868a403bfd7a93a3001ef22ef02e3f");
    CHECK(hexof(ntlm::ntowfv2(Secret::from_string("Password"), "User", "DOMAIN")->reveal()) !=
          "0c868a403bfd7a93a3001ef22ef02e3f");

    auto challenge = ntlm::parse_challenge(unhex(kSpecChallenge));
    REQUIRE(challenge);
    CHECK(hexof(challenge->server_challenge) == "0123456789abcdef");
    CHECK(challenge->target_name == "Server");
    CHECK(challenge->target_info.size() == 36);
    CHECK_FALSE(challenge->timestamp);

    auto r = ntlm::v2_response(*key, *challenge, 0, kClientChallenge);
    CHECK(hexof(r.nt_proof) == "68cd0ab851e51c96aabc927bebef6a1c");
    CHECK(hexof(r.lm_response) == "86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa");
    CHECK(hexof(r.session_base_key) == "8de40ccadbc14a82f15cb0ad0de95ca3");
    // The blob after NTProofStr: 0101, zeros, time 0, the client challenge, zeros, the AV pairs, zeros.
    CHECK(hexof(std::span(r.nt_response).subspan(16, 28)) ==
          "0101000000000000" "0000000000000000" "aaaaaaaaaaaaaaaa" "00000000");
    CHECK(r.nt_response.size() == 16 + 28 + 36 + 4);

    // A wrong password gives another proof: what the proxy checks.
    auto wrong = ntlm::ntowfv2(Secret::from_string("Passw0rd"), "User", "Domain");
    CHECK(hexof(ntlm::v2_response(*wrong, *challenge, 0, kClientChallenge).nt_proof) !=
          "68cd0ab851e51c96aabc927bebef6a1c");
}

TEST_CASE("NTLM: the authenticate message carries the names and responses where its fields say") {
    auto challenge = ntlm::parse_challenge(unhex(kSpecChallenge));
    REQUIRE(challenge);
    auto msg = ntlm::authenticate_message(*challenge, {"User", "Domain"}, Secret::from_string("Password"), "COMPUTER", 0,
                                          kClientChallenge);
    REQUIRE(msg);
    std::vector<std::uint8_t> m(msg->reveal().begin(), msg->reveal().end());
    CHECK(hexof(std::span(m).first(12)) == "4e544c4d5353500003000000");
    CHECK(hexof(field(m, 28)) == "44006f006d00610069006e00");  // "Domain"
    CHECK(hexof(field(m, 36)) == "5500730065007200");          // "User"
    CHECK(hexof(field(m, 44)) == "43004f004d0050005500540045005200");  // "COMPUTER"
    CHECK(hexof(field(m, 12)) == "86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa");
    auto nt = field(m, 20);
    CHECK(hexof(std::span(nt).first(16)) == "68cd0ab851e51c96aabc927bebef6a1c");
    CHECK(le16(m, 52) == 0);  // no session key: nothing is signed or sealed afterwards
    const std::uint32_t flags = le32(m, 60);
    CHECK((flags & 0x00000001) != 0);  // Unicode
    CHECK((flags & 0x00000200) != 0);  // NTLM
    CHECK((flags & 0x40000000) == 0);  // no key exchange
}

TEST_CASE("NTLM: a timestamp from the proxy is used, and the LM response is then zeros") {
    // The spec's challenge with an MsvAvTimestamp pair added before MsvAvEOL.
    auto m = unhex(kSpecChallenge);
    m.resize(m.size() - 4);
    const std::vector<std::uint8_t> ts = {7, 0, 8, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x08, 0, 0, 0, 0};
    m.insert(m.end(), ts.begin(), ts.end());
    m[40] = m[42] = static_cast<std::uint8_t>(36 - 4 + ts.size());
    auto c = ntlm::parse_challenge(m);
    REQUIRE(c);
    REQUIRE(c->timestamp);
    CHECK(*c->timestamp == 0x0877665544332211ull);
    auto key = ntlm::ntowfv2(Secret::from_string("Password"), "User", "Domain");
    auto r = ntlm::v2_response(*key, *c, 12345, kClientChallenge);
    CHECK(hexof(std::span(r.nt_response).subspan(24, 8)) == "1122334455667708");
    CHECK(r.lm_response == std::vector<std::uint8_t>(24, 0));
}

TEST_CASE("NTLM: the user as DOMAIN\\user, user@domain, or in the proxy's target domain") {
    ntlm::Challenge c;
    c.target_name = "CORP";
    auto a = ntlm::split_user("EXAMPLE\\alice", c);
    REQUIRE(a);
    CHECK(a->domain == "EXAMPLE");
    CHECK(a->user == "alice");
    auto b = ntlm::split_user("alice@example.test", c);
    REQUIRE(b);
    CHECK(b->user == "alice@example.test");
    CHECK(b->domain.empty());
    auto d = ntlm::split_user("alice", c);
    REQUIRE(d);
    CHECK(d->domain == "CORP");
    c.target_name.reset();
    auto e = ntlm::split_user("alice", c);
    REQUIRE_FALSE(e);
    CHECK(e.error().message.find("DOMAIN\\user") != std::string::npos);
    CHECK_FALSE(ntlm::split_user("EXAMPLE\\", c));
    // Non-ASCII user names are upper-cased by Unicode rules (C.UTF-8).
    auto k1 = ntlm::ntowfv2(Secret::from_string("pw"), "j\xc3\xb6rg", "D");
    auto k2 = ntlm::ntowfv2(Secret::from_string("pw"), "J\xc3\x96RG", "D");
    REQUIRE(k1);
    REQUIRE(k2);
    CHECK(k1->equals(*k2));
    CHECK_FALSE(ntlm::ntowfv2(Secret::from_string("pw"), "bad\xff", "D"));
}

TEST_CASE("NTLM: hostile challenges end in a clear error, never a read outside the message") {
    const auto good = unhex(kSpecChallenge);
    CHECK(ntlm::parse_challenge(std::span(good).first(31)).error().message.find("too short") != std::string::npos);
    auto bad_sig = good;
    bad_sig[0] = 'X';
    CHECK(ntlm::parse_challenge(bad_sig).error().message.find("not an NTLMSSP") != std::string::npos);
    auto type1 = good;
    type1[8] = 1;
    CHECK(ntlm::parse_challenge(type1).error().message.find("type 1") != std::string::npos);
    auto info_out = good;
    info_out[44] = 0xf0;  // target info offset past the end
    CHECK(ntlm::parse_challenge(info_out).error().message.find("outside the message") != std::string::npos);
    auto info_long = good;
    info_long[40] = info_long[42] = 0xff;
    info_long[41] = info_long[43] = 0xff;
    CHECK_FALSE(ntlm::parse_challenge(info_long));
    auto pair_long = good;
    pair_long[68 + 2] = 0xf0;  // the first AV pair claims 240 bytes
    CHECK(ntlm::parse_challenge(pair_long).error().message.find("longer than itself") != std::string::npos);
    auto no_eol = good;
    no_eol[68 + 32] = 9;  // MsvAvEOL becomes another id: the list never ends
    CHECK(ntlm::parse_challenge(no_eol).error().message.find("MsvAvEOL") != std::string::npos);
    auto oem = good;
    oem[20] &= 0xfe;
    CHECK(ntlm::parse_challenge(oem).error().message.find("Unicode") != std::string::npos);
    // The target name outside the message only loses the name (squid's ntlm_fake_auth does this).
    auto name_out = good;
    name_out[16] = name_out[17] = name_out[18] = 0xaa;
    auto c = ntlm::parse_challenge(name_out);
    REQUIRE(c);
    CHECK_FALSE(c->target_name);
    // squid 5.7's ntlm_fake_auth challenge as it sends it: no target info, garbage name offset.
    auto squid = ntlm::decode_token("TlRMTVNTUAACAAAACQAJAK6qqqoFgggAyUKMQj9YgNUAAAAAAAA6AFdPUktHUk9VUA==");
    REQUIRE(squid);
    auto s = ntlm::parse_challenge(*squid);
    REQUIRE(s);
    CHECK(s->target_info.empty());
    CHECK_FALSE(s->target_name);
    // Every truncation and every one-byte change of the header parses or fails cleanly.
    for (std::size_t n = 0; n <= good.size(); ++n) (void)ntlm::parse_challenge(std::span(good).first(n));
    for (std::size_t i = 0; i < 68; ++i)
        for (int v : {0x00, 0x7f, 0xff}) {
            auto m = good;
            m[i] = static_cast<std::uint8_t>(v);
            if (auto p = ntlm::parse_challenge(m))
                (void)ntlm::authenticate_message(*p, {"u", "d"}, Secret::from_string("p"), "H", 0, kClientChallenge);
        }
    CHECK_FALSE(ntlm::decode_token("not base64!"));
    CHECK_FALSE(ntlm::decode_token(std::string(70000, 'A')));
}

TEST_CASE("NTLM: the negotiate message and FILETIME") {
    auto m = ntlm::negotiate_message();
    CHECK(m.size() == 32);
    CHECK(hexof(std::span(m).first(12)) == "4e544c4d5353500001000000");
    CHECK(ntlm::filetime_from_unix(0, 0) == 116444736000000000ull);
    CHECK(ntlm::filetime_from_unix(1, 500) == 116444736010000005ull);
}

namespace {

std::string text(const Secret& s) { return std::string(s.reveal_text()); }

ConnectReply refusal(std::vector<std::string> authenticate, int status = 407) {
    ConnectReply r;
    r.status = status;
    r.reason = "Proxy Authentication Required";
    r.authenticate = std::move(authenticate);
    return r;
}

std::string spec_challenge_b64() {
    // base64 of kSpecChallenge
    return "TlRMTVNTUAACAAAADAAMADgAAAAzgori";
}

}  // namespace

TEST_CASE("CONNECT authentication: NTLM by default, on one connection, each method once") {
    auto spec = parse_proxy_url("http://EXAMPLE%5Calice:Secret-Pw1@proxy.test:3128/");
    REQUIRE(spec);
    ConnectAuth auth(*spec, ProxyAuthMethods{}, "vpn.test", 443);
    const std::string first = text(auth.first_request());
    CHECK(first.find("Proxy-Authorization") == std::string::npos);
    CHECK(first.rfind("CONNECT vpn.test:443 HTTP/1.1\r\n", 0) == 0);

    auto s1 = auth.on_refusal(refusal({"NTLM", "Basic realm=\"p\""}), true, 0, kClientChallenge);
    REQUIRE(s1.kind == ConnectAuth::Step::Kind::send);
    CHECK(text(s1.request).find("Proxy-Authorization: NTLM TlRMTVNTUAAB") != std::string::npos);
    CHECK(std::string(auth.method()) == "NTLM");

    // The challenge, base64 of the spec's message.
    const auto raw = unhex(kSpecChallenge);
    std::string b64;
    {
        static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (std::size_t i = 0; i < raw.size(); i += 3) {
            std::uint32_t v = raw[i] << 16;
            if (i + 1 < raw.size()) v |= raw[i + 1] << 8;
            if (i + 2 < raw.size()) v |= raw[i + 2];
            b64 += t[(v >> 18) & 63];
            b64 += t[(v >> 12) & 63];
            b64 += i + 1 < raw.size() ? t[(v >> 6) & 63] : '=';
            b64 += i + 2 < raw.size() ? t[v & 63] : '=';
        }
    }
    CHECK(b64.rfind(spec_challenge_b64(), 0) == 0);
    // A challenge on a connection the proxy closes cannot be answered.
    {
        ConnectAuth other(*spec, ProxyAuthMethods{}, "vpn.test", 443);
        (void)other.first_request();
        (void)other.on_refusal(refusal({"NTLM"}), true, 0, kClientChallenge);
        auto closed = other.on_refusal(refusal({"NTLM " + b64}), false, 0, kClientChallenge);
        CHECK(closed.kind == ConnectAuth::Step::Kind::fail);
        CHECK(closed.error.find("kept alive") != std::string::npos);
    }
    auto s2 = auth.on_refusal(refusal({"NTLM " + b64}), true, 0, kClientChallenge);
    REQUIRE(s2.kind == ConnectAuth::Step::Kind::send);
    const std::string third = text(s2.request);
    CHECK(third.find("Proxy-Authorization: NTLM TlRMTVNTUAAD") != std::string::npos);
    CHECK(third.find("Secret-Pw1") == std::string::npos);

    // Refused again: Basic is off by default, so that is the end, not a loop.
    auto s3 = auth.on_refusal(refusal({"NTLM", "Basic realm=\"p\""}), true, 0, kClientChallenge);
    REQUIRE(s3.kind == ConnectAuth::Step::Kind::fail);
    CHECK(s3.error.find("407") != std::string::npos);
    CHECK(s3.error.find("NTLM authentication as user 'EXAMPLE\\alice' was not accepted") != std::string::npos);
    CHECK(s3.error.find("Secret-Pw1") == std::string::npos);
}

TEST_CASE("CONNECT authentication: Basic only when allowed; NTLM, then Basic, when both are") {
    auto spec = parse_proxy_url("http://alice:pw@proxy.test:3128/");
    REQUIRE(spec);
    {
        ConnectAuth auth(*spec, ProxyAuthMethods{}, "vpn.test", 443);
        (void)auth.first_request();
        auto s = auth.on_refusal(refusal({"Basic realm=\"p\""}, 401), false, 0, kClientChallenge);
        REQUIRE(s.kind == ConnectAuth::Step::Kind::fail);
        CHECK(s.error.find("off unless --proxy-auth=basic") != std::string::npos);
    }
    {
        auto m = parse_proxy_auth("basic");
        REQUIRE(m);
        ConnectAuth auth(*spec, *m, "vpn.test", 443);
        CHECK(text(auth.first_request()).find("Proxy-Authorization: Basic YWxpY2U6cHc=\r\n") != std::string::npos);
        auto s = auth.on_refusal(refusal({"Basic realm=\"p\""}, 401), false, 0, kClientChallenge);
        REQUIRE(s.kind == ConnectAuth::Step::Kind::fail);
        CHECK(s.error.find("were not accepted") != std::string::npos);
    }
    {
        auto m = parse_proxy_auth("ntlm,basic");
        REQUIRE(m);
        ConnectAuth auth(*spec, *m, "vpn.test", 443);
        CHECK(text(auth.first_request()).find("Proxy-Authorization") == std::string::npos);
        // The proxy closed after its 407: the negotiate goes on a new connection.
        auto s1 = auth.on_refusal(refusal({"Basic realm=\"p\"", "NTLM"}), false, 0, kClientChallenge);
        REQUIRE(s1.kind == ConnectAuth::Step::Kind::reconnect_then_send);
        CHECK(text(s1.request).find("NTLM TlRMTVNTUAAB") != std::string::npos);
        auto s2 = auth.on_refusal(refusal({"Basic realm=\"p\"", "NTLM"}), true, 0, kClientChallenge);
        CHECK(s2.kind == ConnectAuth::Step::Kind::fail);  // no challenge in the reply to the negotiate
        CHECK(s2.error.find("without a challenge") != std::string::npos);
    }
    {
        ConnectAuth none(*parse_proxy_url("http://proxy.test:3128/"), ProxyAuthMethods{}, "vpn.test", 443);
        (void)none.first_request();
        auto s = none.on_refusal(refusal({"NTLM", "Negotiate"}), true, 0, kClientChallenge);
        REQUIRE(s.kind == ConnectAuth::Step::Kind::fail);
        CHECK(s.error.find("give --proxy http://USER:PASS@host:port/") != std::string::npos);
        ConnectAuth kerb(*spec, ProxyAuthMethods{}, "vpn.test", 443);
        (void)kerb.first_request();
        auto k = kerb.on_refusal(refusal({"Negotiate"}), true, 0, kClientChallenge);
        CHECK(k.error.find("espvpn answers Basic and NTLM, the proxy offers Negotiate") != std::string::npos);
        auto forbidden = kerb.on_refusal(refusal({}, 403), true, 0, kClientChallenge);
        CHECK(forbidden.error.find("403") != std::string::npos);
    }
}
