// CSD host scan: the request in a config-auth reply, and the wrapper's command
// line and environment as openconnect builds them (auth.c run_csd_script).
#include <doctest/doctest.h>

#include "protocols/anyconnect/auth.h"
#include "protocols/anyconnect/csd.h"

using namespace espvpn;
using namespace espvpn::anyconnect;

namespace {

// The shape an ASA sends (openconnect's auth.c documents the same elements).
const char* kHostScanReply = R"(<?xml version="1.0" encoding="UTF-8"?>
<config-auth client="vpn" type="auth-request" aggregate-auth-version="2">
<opaque is-for="sg"><tunnel-group>main</tunnel-group></opaque>
<auth id="main"><title>Login</title><message>Please wait</message>
<form action="/+webvpn+/index.html"><input type="text" name="username" label="Username:"/></form></auth>
<host-scan>
<host-scan-ticket>TICKET123</host-scan-ticket>
<host-scan-token>TOKEN456</host-scan-token>
<host-scan-base-uri>/+CSCOE+/sdesktop/token.xml</host-scan-base-uri>
<host-scan-wait-uri>/+CSCOE+/sdesktop/wait.html</host-scan-wait-uri>
</host-scan>
</config-auth>)";

}  // namespace

TEST_CASE("csd: a config-auth reply with <host-scan> carries the request") {
    auto r = parse_auth_reply(kHostScanReply);
    REQUIRE(r);
    REQUIRE(r->host_scan);
    CHECK(r->host_scan->ticket == "TICKET123");
    CHECK(r->host_scan->token == "TOKEN456");
    CHECK(r->host_scan->base_uri == "/+CSCOE+/sdesktop/token.xml");
    CHECK(r->host_scan->wait_uri == "/+CSCOE+/sdesktop/wait.html");
    CHECK(csd_wait_path(*r->host_scan) == "/+CSCOE+/sdesktop/wait.html");
}

TEST_CASE("csd: no request without all four parts (as openconnect), and none in an ocserv reply") {
    std::string partial = kHostScanReply;
    partial.replace(partial.find("<host-scan-token>TOKEN456</host-scan-token>"), 43, "");
    auto r = parse_auth_reply(partial);
    REQUIRE(r);
    CHECK_FALSE(r->host_scan);
    auto plain = parse_auth_reply(R"(<config-auth client="vpn" type="auth-request"><auth id="main">
<form method="post" action="/auth"><input type="text" name="username" label="Username:" /></form></auth></config-auth>)");
    REQUIRE(plain);
    CHECK_FALSE(plain->host_scan);
}

TEST_CASE("csd: the wrapper's arguments and environment are openconnect's") {
    AcHostScan scan{"TICKET123", "TOKEN456", "/+CSCOE+/sdesktop/token.xml", "+CSCOE+/sdesktop/wait.html"};
    CsdInputs in{"/usr/libexec/openconnect/csd-post.sh", "vpn.example.com", "Staff",
                 "0123456789abcdef0123456789abcdef", "", "pin-sha256:q0a7c6RTRzSDmwGgq8A7dgX7zNXIOFQkcZ6+xM3KFU0="};
    auto c = csd_wrapper_command(scan, in);
    REQUIRE(c);
    const std::vector<std::string> argv = {"/usr/libexec/openconnect/csd-post.sh", "", "-ticket", "\"TICKET123\"",
                                           "-stub", "\"0\"", "-group", "\"Staff\"", "-certhash",
                                           "\"0123456789ABCDEF0123456789ABCDEF:\"", "-url",
                                           "\"https://vpn.example.com/+CSCOE+/sdesktop/token.xml\"", "-langselen"};
    CHECK(c->argv == argv);
    const std::vector<std::pair<std::string, std::string>> env = {
        {"CSD_SHA256", "q0a7c6RTRzSDmwGgq8A7dgX7zNXIOFQkcZ6+xM3KFU0="},
        {"CSD_TOKEN", "TOKEN456"},
        {"CSD_HOSTNAME", "vpn.example.com"}};
    CHECK(c->env == env);
    CHECK(csd_wait_path(scan) == "/+CSCOE+/sdesktop/wait.html");
}

TEST_CASE("csd: without --csd-wrapper the request is a clear error naming the option") {
    AcHostScan scan{"T", "K", "/b", "/w"};
    auto c = csd_wrapper_command(scan, CsdInputs{"", "h", "", "", "", "pin-sha256:x"});
    REQUIRE_FALSE(c);
    CHECK(c.error().message.find("--csd-wrapper") != std::string::npos);
}

TEST_CASE("csd: the wait page is done when it is XML, fetched again while it is an HTML refresh page") {
    CHECK(classify_wait_page("<?xml version=\"1.0\"?><hostscan><status>TOKEN_SUCCESS</status></hostscan>") ==
          CsdWait::done);
    CHECK(classify_wait_page("<html><head><META HTTP-EQUIV=\"Refresh\" content=\"1\"></head></html>") ==
          CsdWait::refresh);
    CHECK(classify_wait_page("<html><body>Service unavailable</body></html>") == CsdWait::unknown);
    CHECK(classify_wait_page("") == CsdWait::unknown);
    CHECK(classify_wait_page(" <?xml version=\"1.0\"?>") == CsdWait::unknown);  // openconnect: "<?xml" first
}
