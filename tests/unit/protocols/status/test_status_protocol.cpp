#include <doctest/doctest.h>

#include <string>

#include "protocols/status/status_protocol.h"

using namespace espvpn::status;

TEST_CASE("status requests: the three names, anything else refused with a reason") {
    CHECK(*parse_request(R"({"request": "status"})") == Request::status);
    CHECK(*parse_request("{\"request\":\"disconnect\"}\r") == Request::disconnect);
    CHECK(*parse_request(request_line(Request::reconnect).substr(0, request_line(Request::reconnect).size() - 1)) ==
          Request::reconnect);
    CHECK(parse_request("status").error().message == "not a JSON object");
    CHECK(parse_request("[1]").error().message == "not a JSON object");
    CHECK(parse_request(R"({"request": 1})").error().message == "no \"request\" member");
    CHECK(parse_request(R"({"request": "reboot"})").error().message.find("unknown request") == 0);
    CHECK(parse_request(std::string(kMaxRequestLine + 1, ' ')).error().message == "request too long");
    CHECK(!parse_request("{\"request\": \"status\"")); // truncated
    CHECK(!parse_request(std::string("{\"request\": \"st\xff\"}")));
}

TEST_CASE("status reply: round trip, server text escaped, invalid UTF-8 replaced") {
    Snapshot s;
    s.state = State::needs_login;
    s.protocol = "gp";
    s.gateway = "vpn.example.com";
    s.transport = "ESP";
    s.since = 1700000000;
    s.bytes_in = 1ull << 40;
    s.bytes_out = 7;
    s.last_error = "refused\n\x1b[31mred\xff";
    s.interface_name = "tun0";
    s.always_on = true;
    const std::string line = status_reply(s);
    CHECK(line.back() == '\n');
    CHECK(line.find('\n') == line.size() - 1);   // one line
    CHECK(line.find('\x1b') == std::string::npos);  // a control character is escaped
    CHECK(line.find("\"expires\":null") != std::string::npos);
    auto r = parse_reply(line.substr(0, line.size() - 1));
    REQUIRE(r);
    REQUIRE(r->status);
    CHECK(r->ok);
    CHECK(r->status->state == State::needs_login);
    CHECK(r->status->bytes_in == (1ull << 40));
    CHECK(r->status->gateway == "vpn.example.com");
    CHECK(r->status->last_error.substr(0, 8) == "refused\n");
    CHECK(r->status->last_error[8] == '\x1b');
    CHECK(r->status->always_on);
    s.expires = 1700003600;
    CHECK(parse_reply(status_reply(s))->status->expires == 1700003600);
    s.state = State::trusted_network;
    CHECK(status_reply(s).find("\"state\":\"trusted-network\"") != std::string::npos);
    CHECK(parse_reply(status_reply(s))->status->state == State::trusted_network);
    s.state = State::captive_portal;
    s.portal = "http://portal.example/login?x=%1B";
    CHECK(status_reply(s).find("\"state\":\"captive-portal\"") != std::string::npos);
    auto captive = parse_reply(status_reply(s));
    REQUIRE(captive->status);
    CHECK(captive->status->state == State::captive_portal);
    CHECK(captive->status->portal == s.portal);
}

TEST_CASE("replies: ok and error lines; a hostile reply is an error, not a crash") {
    auto ok = parse_reply(ok_reply("disconnecting"));
    REQUIRE(ok);
    CHECK(ok->ok);
    CHECK(ok->message == "disconnecting");
    CHECK(!ok->status);
    auto err = parse_reply(error_reply("permission denied"));
    REQUIRE(err);
    CHECK(!err->ok);
    CHECK(err->error == "permission denied");
    CHECK(!parse_reply("nonsense"));
    CHECK(!parse_reply(R"({"ok": "yes"})"));
    CHECK(!parse_reply(R"({"ok": true, "state": "dancing"})"));
    CHECK(!parse_reply(R"({"ok": true, "state": "connected", "bytes_in": -1})"));
    CHECK(!parse_reply(R"({"ok": true, "state": "connected", "expires": "soon"})"));
}
