#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "protocols/http/response_parser.h"

using namespace espvpn;
using namespace espvpn::http;

namespace {

// Feeds wire cut at the given offsets; finishes with EOF when the parser is not
// done by the end of the input and eof is set.
Result<Response> parse_pieces(std::string_view wire, const std::vector<std::size_t>& cuts,
                              std::string_view method = "GET", ParserLimits limits = {}, bool eof = false) {
    ResponseParser p(limits);
    p.begin(method);
    std::size_t pos = 0;
    std::vector<std::size_t> ends = cuts;
    ends.push_back(wire.size());
    for (auto end : ends) {
        while (pos < end && !p.done()) {
            auto used = p.feed(wire.substr(pos, end - pos));
            if (!used) return used.error();
            pos += *used;
            if (*used == 0) break;
        }
        if (p.done()) break;
    }
    if (!p.done()) {
        if (!eof) return make_error("incomplete");
        if (auto st = p.finish_eof(); !st) return st.error();
    }
    return p.take_response();
}

Result<Response> parse(std::string_view wire, std::string_view method = "GET", ParserLimits limits = {},
                       bool eof = false) {
    return parse_pieces(wire, {}, method, limits, eof);
}

// The same response, however the bytes are split: at every single boundary,
// and one byte at a time.
void check_every_split(std::string_view wire, bool eof, void (*check)(const Response&)) {
    auto whole = parse(wire, "GET", {}, eof);
    REQUIRE_MESSAGE(whole.ok(), whole.error().message);
    check(*whole);
    for (std::size_t cut = 1; cut < wire.size(); ++cut) {
        auto r = parse_pieces(wire, {cut}, "GET", {}, eof);
        REQUIRE_MESSAGE(r.ok(), "split at ", cut, ": ", r.error().message);
        check(*r);
    }
    std::vector<std::size_t> bytewise;
    for (std::size_t i = 1; i < wire.size(); ++i) bytewise.push_back(i);
    auto r = parse_pieces(wire, bytewise, "GET", {}, eof);
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    check(*r);
}

std::string error_of(std::string_view wire, ParserLimits limits = {}, bool eof = false,
                     std::string_view method = "GET") {
    auto r = parse(wire, method, limits, eof);
    REQUIRE_FALSE_MESSAGE(r.ok(), "parsed: ", wire);
    return r.error().message;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Content-Length response, split at every byte boundary") {
    check_every_split(
        "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nX-Dup: a\r\nx-dup: b\r\n"
        "Set-Cookie: PHPSESSID=abc; path=/\r\nContent-Length: 11\r\n\r\n<response/>",
        false, [](const Response& r) {
            CHECK(r.status == 200);
            CHECK(r.reason == "OK");
            CHECK(r.version_minor == 1);
            CHECK(r.headers.get("content-type") == "text/xml");
            CHECK(r.headers.get_all("X-DUP") == std::vector<std::string_view>{"a", "b"});
            CHECK_FALSE(r.headers.has("Set-Cookie"));
            REQUIRE(r.set_cookies.size() == 1);
            CHECK(r.set_cookies[0].reveal_text() == "PHPSESSID=abc; path=/");
            CHECK(r.body.reveal_text() == "<response/>");
            CHECK(r.keep_alive);
        });
}

TEST_CASE("chunked body with extensions and trailers, split at every byte boundary") {
    check_every_split(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "4;name=value\r\nWiki\r\n5 ; x\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n000\r\nX-Trailer: t\r\n\r\n",
        false, [](const Response& r) {
            CHECK(r.body.reveal_text() == "Wikipedia in\r\n\r\nchunks.");
            CHECK(r.trailers.get("x-trailer") == "t");
            CHECK(r.keep_alive);
        });
}

TEST_CASE("body delimited by connection close, split at every byte boundary") {
    check_every_split("HTTP/1.1 200 OK\r\nServer: x\r\n\r\nuntil the end", true, [](const Response& r) {
        CHECK(r.body.reveal_text() == "until the end");
        CHECK_FALSE(r.keep_alive);
    });
}

TEST_CASE("bare LF line endings and a missing reason phrase are tolerated") {
    auto r = parse("HTTP/1.1 204\nX: y\n\n");
    REQUIRE(r.ok());
    CHECK(r->status == 204);
    CHECK(r->reason.empty());
    CHECK(r->headers.get("X") == "y");
}

TEST_CASE("1xx responses are skipped, their headers dropped") {
    auto r = parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nX-Interim: 1\r\n\r\n"
                   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK_FALSE(r->headers.has("X-Interim"));
    CHECK(r->body.reveal_text() == "hi");

    std::string many;
    for (int i = 0; i < 17; ++i) many += "HTTP/1.1 100 Continue\r\n\r\n";
    CHECK(contains(error_of(many + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), "interim"));
}

TEST_CASE("HEAD, 204, 304 and a CONNECT 200 carry no body; bytes after the head are left over") {
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
    ResponseParser p;
    p.begin("HEAD");
    auto used = p.feed(head + "NEXT");
    REQUIRE(used.ok());
    CHECK(*used == head.size());
    CHECK(p.done());
    CHECK(p.take_response().body.empty());

    for (const char* status : {"204 No Content", "304 Not Modified"}) {
        auto r = parse(std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 5\r\n\r\n");
        REQUIRE(r.ok());
        CHECK(r->body.empty());
    }

    const std::string connect = "HTTP/1.1 200 CONNECTED\r\nX-CSTP-MTU: 1399\r\n\r\n";
    p.begin("CONNECT");
    used = p.feed(connect + "STF\x01 tunnel bytes");
    REQUIRE(used.ok());
    CHECK(*used == connect.size());
    CHECK(p.take_response().headers.get("X-CSTP-MTU") == "1399");
}

TEST_CASE("keep-alive: HTTP/1.1 unless Connection: close; HTTP/1.0 only with keep-alive") {
    CHECK(parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")->keep_alive);
    CHECK_FALSE(parse("HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n")->keep_alive);
    CHECK_FALSE(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")->keep_alive);
    CHECK(parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")->keep_alive);
    // Both framings: chunked wins and the connection is not reused.
    auto both = parse("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n");
    REQUIRE(both.ok());
    CHECK(both->body.reveal_text() == "a");
    CHECK_FALSE(both->keep_alive);
}

TEST_CASE("two responses in one buffer: feed stops at the end of the first") {
    const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA";
    const std::string second = "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nB";
    ResponseParser p;
    p.begin("GET");
    auto used = p.feed(first + second);
    REQUIRE(used.ok());
    CHECK(*used == first.size());
    CHECK(p.take_response().body.reveal_text() == "A");
    p.begin("GET");
    used = p.feed(second);
    REQUIRE(used.ok());
    auto r = p.take_response();
    CHECK(r.status == 404);
    CHECK(r.body.reveal_text() == "B");
}

TEST_CASE("limits: header bytes, header count, body size") {
    ParserLimits small;
    small.max_header_bytes = 256;
    small.max_header_count = 4;
    small.max_body_bytes = 10;

    // An endless header line fed in pieces errors once past the limit.
    ResponseParser p(small);
    p.begin("GET");
    REQUIRE(p.feed("HTTP/1.1 200 OK\r\nX-Endless: ").ok());
    Status failed;
    for (int i = 0; i < 100 && failed.ok(); ++i) {
        auto r = p.feed(std::string(16, 'a'));
        if (!r) failed = r.error();
    }
    REQUIRE_FALSE(failed.ok());
    CHECK(contains(failed.error().message, "header section exceeds the limit of 256 bytes"));
    // The error is sticky.
    CHECK_FALSE(p.feed("more").ok());

    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nSet-Cookie: d=4\r\nE: 5\r\n\r\n", small),
                   "more than 4 header fields"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", small), "body of 11 bytes exceeds"));
    CHECK(parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", "GET", small).ok());
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n5\r\nghijk\r\n", small),
                   "exceeds"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", small),
                   "chunk size exceeds"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\n\r\n0123456789x", small, true), "exceeds the limit of 10 bytes"));
    // Trailers are a header section of their own, under the same limit.
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + std::string(300, 't') +
                                "\r\n\r\n",
                            small),
                   "header section exceeds"));
    // A chunk-size line may not grow forever either.
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + std::string(5000, 'e')),
                   "chunk-size line longer"));
}

TEST_CASE("malformed status lines are rejected with the line quoted") {
    for (const char* line : {"HTTP/2 200 OK", "HTTP/1.1 20 OK", "HTTP/1.1 200OK", "ICY 200 OK", "HTTP/1.1 2000 OK",
                             "HTTP/1.x 200 OK", "http/1.1 200 OK", "HTTP/1.1  200 OK"}) {
        auto msg = error_of(std::string(line) + "\r\n\r\n");
        CHECK_MESSAGE(contains(msg, "malformed status line"), line, " -> ", msg);
    }
    CHECK(contains(error_of("HTTP/1.1 099 Low\r\n\r\n"), "out of range"));
    CHECK(contains(error_of("HTTP/1.1 600 High\r\n\r\n"), "out of range"));
}

TEST_CASE("malformed header lines are rejected") {
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nNoColonHere\r\n\r\n"), "no colon"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n"), "invalid header name"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nName : x\r\n\r\n"), "invalid header name"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\n: x\r\n\r\n"), "invalid header name"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n"), "folding"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nA: x\ry\r\n\r\n"), "control character"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"), "invalid Content-Length"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), "invalid Content-Length"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n"), "invalid Content-Length"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), "conflicting"));
    CHECK(parse("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok").ok());
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"), "unsupported Transfer-Encoding"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), "unsupported"));
}

TEST_CASE("malformed chunk sizes and framing are rejected") {
    const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const char* bad : {"zz\r\n", "\r\n", "-1\r\n", "5 x\r\n", "0x5\r\n", " 5\r\n"})
        CHECK_MESSAGE(contains(error_of(head + bad), "invalid chunk size line"), bad);
    CHECK(contains(error_of(head + "3\r\nabcX\r\n0\r\n\r\n"), "not followed by CRLF"));
    CHECK(parse(head + "3\nabc\n0\n\n").ok());  // bare LF here too
}

TEST_CASE("EOF: clean only for close-delimited bodies; says where it happened") {
    ResponseParser p;
    p.begin("GET");
    CHECK_FALSE(p.started());
    auto st = p.finish_eof();
    REQUIRE_FALSE(st.ok());
    CHECK(contains(st.error().message, "before any response byte"));

    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-", {}, true), "middle of the response headers"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", {}, true), "7 body bytes"));
    CHECK(contains(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", {}, true), "chunked"));

    p.begin("GET");
    REQUIRE(p.feed("H").ok());
    CHECK(p.started());
}

TEST_CASE("server bytes in errors are escaped: no control sequences reach the terminal") {
    // Found with tests/integration/hostile (a gateway answering binary garbage).
    const std::string garbage("\x1b[2J\x07\x00\x9b" "evil\r\n\r\n", 15);
    std::string e = error_of(garbage);
    CHECK(contains(e, "malformed status line \"\\x1b[2J\\x07\\x00\\x9bevil\""));
    CHECK(std::none_of(e.begin(), e.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }));
    e = error_of("HTTP/1.1 200 OK\r\nContent-Length: \x1b]0;x\x07\r\n\r\n");
    CHECK(contains(e, "invalid Content-Length \"\\x1b]0;x\\x07\""));
    e = error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\x1bZ\r\n");
    CHECK(contains(e, "invalid chunk size line \"\\x1bZ\""));
    const std::string long_line = "HTTP/1.1 " + std::string(200, 'x') + "\r\n\r\n";
    CHECK(contains(error_of(long_line), "xxx\"..."));  // truncated, marked
}
