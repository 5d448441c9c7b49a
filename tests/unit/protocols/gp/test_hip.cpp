#include <doctest/doctest.h>

#include "protocols/gp/hip.h"
#include "protocols/xml/document.h"

using namespace espvpn;
using namespace espvpn::gp;

namespace {
GpSessionCookie cookie() {
    GpSessionCookie c;
    c.authcookie = Secret::from_string("secret-cookie");
    c.portal = "GP_Gateway-N";
    c.user = "alice";
    c.domain = "(empty_domain)";
    c.preferred_ip = "10.20.30.40";
    c.computer = "my-host";
    return c;
}
}  // namespace

TEST_CASE("gp hip: md5 is OC's, independent of authcookie and preferred addresses") {
    GpSessionCookie c = cookie();
    CHECK(c.hip_md5_input() == "portal=GP_Gateway-N&user=alice&domain=%28empty_domain%29&computer=my-host");
    // md5("portal=GP_Gateway-N&user=alice&domain=%28empty_domain%29&computer=my-host"),
    // computed independently with `printf %s ... | md5sum`.
    CHECK(hip_report_md5(c) == "2b382cfd012e3930db0ccd0d6138aade");
    GpSessionCookie other = c.clone();
    other.authcookie = Secret::from_string("another");
    other.preferred_ip = "10.9.9.9";
    CHECK(hip_report_md5(other) == hip_report_md5(c));
    other.user = "bob";
    CHECK(hip_report_md5(other) != hip_report_md5(c));
}

TEST_CASE("gp hip: check and ack replies") {
    auto yes = parse_hip_check_reply(
        R"(<response status="success"><hip-report-needed>yes</hip-report-needed><delay>0</delay></response>)");
    REQUIRE(yes.ok());
    CHECK(std::get<bool>(*yes));
    auto no = parse_hip_check_reply(
        R"(<response status="success"><hip-report-needed>no</hip-report-needed></response>)");
    REQUIRE(no.ok());
    CHECK_FALSE(std::get<bool>(*no));
    auto odd = parse_hip_check_reply("<response><hip-report-needed>maybe</hip-report-needed></response>");
    REQUIRE_FALSE(odd.ok());
    CHECK(odd.error().message.find("\"maybe\"") != std::string::npos);
    auto missing = parse_hip_check_reply("<response/>");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message == "missing element <response/hip-report-needed>");

    auto ack = parse_ack_reply(R"(<response status="success"><portal>p</portal></response>)");
    REQUIRE(ack.ok());
    CHECK(std::holds_alternative<GpAck>(*ack));
    auto err = parse_ack_reply(R"(<response status="error"><error>Portal name not found</error></response>)");
    REQUIRE(err.ok());
    CHECK(std::get<GpServerError>(*err).kind == GpErrorKind::CookieRejected);
    auto weird = parse_ack_reply("<response/>");
    REQUIRE_FALSE(weird.ok());
}

TEST_CASE("gp hip: the generated report is well-formed and carries the fields") {
    GpHipReportInfo info = GpHipReportInfo::from_session(cookie(), "10.20.30.40", "fd00::1", 1700000000);
    info.host_id = "deadbeef-0000-4000-8000-000000000001";
    info.os = "Linux Debian <12> & \"more\"";
    std::string xml = build_hip_report(info);
    CHECK(xml.find("&lt;12&gt; &amp; &quot;more&quot;") != std::string::npos);
    auto doc = xml::Document::parse(xml);
    REQUIRE(doc.ok());
    REQUIRE(doc->expect_root("hip-report").ok());
    auto r = doc->root();
    CHECK(r.attribute("name") == std::optional<std::string>("hip-report"));
    CHECK(r.child_text_or_empty("md5-sum") == hip_report_md5(cookie()));
    CHECK(r.child_text_or_empty("user-name") == "alice");
    CHECK(r.child_text_or_empty("host-name") == "my-host");
    CHECK(r.child_text_or_empty("ip-address") == "10.20.30.40");
    CHECK(r.child_text_or_empty("ipv6-address") == "fd00::1");
    CHECK(r.child_text_or_empty("generate-time") == "11/14/2023 22:13:20");
    CHECK(r.child_text_or_empty("hip-report-version") == "4");
    auto cats = r.child("categories").children("entry");
    REQUIRE(cats.size() == 9);
    CHECK(cats[0].attribute("name") == std::optional<std::string>("host-info"));
    CHECK(cats[0].child_text_or_empty("os") == "Linux Debian <12> & \"more\"");
    auto nic = cats[0].child("network-interface").children("entry");
    REQUIRE(nic.size() == 1);
    CHECK(nic[0].child("ip-address").children("entry")[0].attribute("name") ==
          std::optional<std::string>("10.20.30.40"));
    CHECK(cats[1].attribute("name") == std::optional<std::string>("antivirus"));
    CHECK(cats[8].attribute("name") == std::optional<std::string>("data-loss-prevention"));
}
