#include <doctest/doctest.h>

#include "fixture.h"
#include "protocols/gp/portal_config.h"
#include "protocols/gp/session_cookie.h"

using namespace espvpn;
using namespace espvpn::gp;

TEST_CASE("gp portal config: gateways, cookies, HIP settings") {
    auto r = parse_portal_config_reply(gp_fixture("portal_config.xml"));
    REQUIRE(r.ok());
    REQUIRE(std::holds_alternative<GpPortalConfig>(*r));
    const auto& c = std::get<GpPortalConfig>(*r);
    CHECK(c.version == "6.0.1-19");
    CHECK(c.portal_name == "GP-Portal");
    REQUIRE(c.gateways.size() == 4);
    CHECK(c.gateways[0].address == "gw-eu.example.com");
    CHECK(c.gateways[0].description == "Europe");
    REQUIRE(c.gateways[0].rules.size() == 2);
    CHECK(c.gateways[0].rules[0].region == "EU");
    CHECK(c.gateways[0].rules[0].priority == 1);
    CHECK(c.gateways[0].priority_for("US") == std::optional<int>(4));  // only "Any" matches
    CHECK(c.gateways[0].priority_for("EU") == std::optional<int>(1));
    CHECK(c.gateways[1].priority_for("US") == std::optional<int>(1));
    CHECK_FALSE(c.gateways[2].priority_for("US").has_value());
    CHECK(c.gateways[3].internal);
    CHECK(c.portal_userauthcookie.reveal_text() == "AbCd+/Efgh==");
    CHECK(c.portal_prelogonuserauthcookie.empty());  // "empty" means absent
    CHECK(c.hip_report_interval == std::optional<unsigned>(3600));
    CHECK(c.hip_categories == std::vector<std::string>{"antivirus", "disk-encryption"});

    auto order = c.preferred_gateways("US");
    REQUIRE(order.size() == 3);
    CHECK(order[0].address == "gw-us.example.com:4443");
    CHECK(order[1].address == "gw-eu.example.com");
    CHECK(order[2].address == "gw-manual.example.com");

    CHECK(c.preferred_gateways("EU")[0].address == "gw-eu.example.com");
    // No region: "Any" rules decide (2 beats 4).
    CHECK(c.preferred_gateways("")[0].address == "gw-us.example.com:4443");

    GpGateway plain{"g", "", {{"Any", 7}}, 3, false};
    CHECK(plain.priority_for("X") == std::optional<int>(3));
}

TEST_CASE("gp portal config: refusal, missing gateways, bad values") {
    auto refused = parse_portal_config_reply("<policy><has-config>no</has-config></policy>");
    REQUIRE(refused.ok());
    CHECK_FALSE(std::get<GpPortalConfig>(*refused).has_config);

    // No gateway is not a parse error: whether that is one depends on where the host is
    // (inside the corporate network a portal may list none: no tunnel needed).
    auto none = parse_portal_config_reply("<policy><version>1</version></policy>");
    REQUIRE(none.ok());
    CHECK(std::get<GpPortalConfig>(*none).gateways.empty());
    CHECK(std::get<GpPortalConfig>(*none).internal_host_checks.empty());

    auto bad_prio = parse_portal_config_reply(
        R"(<policy><gateways><external><list><entry name="g"><priority-rule>
<entry name="Any"><priority>soon</priority></entry></priority-rule></entry></list></external>
</gateways></policy>)");
    REQUIRE_FALSE(bad_prio.ok());
    CHECK(bad_prio.error().message.find("bad priority-rule \"soon\"") != std::string::npos);

    auto bad_hip = parse_portal_config_reply(
        R"(<policy><gateways><external><list><entry name="g"/></list></external></gateways>
<hip-collection><hip-report-interval>hourly</hip-report-interval></hip-collection></policy>)");
    REQUIRE_FALSE(bad_hip.ok());
    CHECK(bad_hip.error().message.find("hip-report-interval") != std::string::npos);
    auto week = parse_portal_config_reply(
        R"(<policy><gateways><external><list><entry name="g"/></list></external></gateways>
<hip-collection><hip-report-interval>604801</hip-report-interval></hip-collection></policy>)");
    REQUIRE_FALSE(week.ok());
    // A short interval is the portal's to choose (a lab gateway, a strict policy): taken as given.
    auto short_hip = parse_portal_config_reply(
        R"(<policy><gateways><external><list><entry name="g"/></list></external></gateways>
<hip-collection><hip-report-interval>5</hip-report-interval></hip-collection></policy>)");
    REQUIRE(short_hip.ok());
    CHECK(std::get<GpPortalConfig>(*short_hip).hip_report_interval == std::optional<unsigned>(5));

    auto fail = parse_portal_config_reply(
        "var respStatus = \"Error\";\nvar respMsg = \"Invalid username or password\";");
    REQUIRE(fail.ok());
    CHECK(std::get<GpServerError>(*fail).kind == GpErrorKind::AuthFailed);
}

TEST_CASE("gp portal config: gp-app-config's captive-portal-exception-timeout") {
    auto with = [](const std::string& entries) {
        auto r = parse_portal_config_reply(
            R"(<policy><gateways><external><list><entry name="g"/></list></external></gateways><gp-app-config><config>)" +
            entries + "</config></gp-app-config></policy>");
        REQUIRE(r.ok());
        return std::get<GpPortalConfig>(*r).captive_portal_exception_timeout;
    };
    const auto entry = [](const char* name, const char* value) {
        return std::string("<entry name=\"") + name + "\"><value><member>" + value + "</member></value></entry>";
    };
    CHECK(with(entry("enforce-globalprotect", "yes") + entry("captive-portal-exception-timeout", "90")) ==
          std::optional<unsigned>(90));
    CHECK(with(entry("captive-portal-exception-timeout", "3600")) == std::optional<unsigned>(3600));
    // 0, out of range, not a number, absent: not set (espvpn's default then)
    for (const char* v : {"0", "3601", "-5", "ten", ""})
        CHECK_FALSE(with(entry("captive-portal-exception-timeout", v)).has_value());
    CHECK_FALSE(with(entry("retry-timeout", "5")).has_value());
    CHECK_FALSE(std::get<GpPortalConfig>(*parse_portal_config_reply(gp_fixture("portal_config.xml")))
                    .captive_portal_exception_timeout.has_value());
}

TEST_CASE("gp gateway login: jnlp to session cookie fields") {
    auto r = parse_gateway_login_reply(gp_fixture("login_jnlp.xml"), "my-laptop");
    REQUIRE(r.ok());
    REQUIRE(std::holds_alternative<GpLoginResult>(*r));
    const auto& l = std::get<GpLoginResult>(*r);
    CHECK(l.cookie.authcookie.reveal_text() == "4dc1b2b7e6a2f8d1c3b5a79e0f123456");
    CHECK(l.cookie.portal == "GP_Gateway-N");
    CHECK(l.cookie.user == "Alice");
    CHECK(l.cookie.domain == "(empty_domain)");
    CHECK(l.cookie.preferred_ip == "10.20.30.40");
    CHECK(l.cookie.preferred_ipv6 == "fd00::1234");
    CHECK(l.cookie.computer == "my-laptop");
    CHECK(l.authentication_source == "LDAP-auth");
    CHECK(l.configuration == "vsys1");
    CHECK(l.password_expiration_days.empty());  // -1 = absent
    CHECK(l.portal_userauthcookie_echo == "portal-cookie-echo");

    std::string cookie(l.cookie.encode().reveal_text());
    CHECK(cookie ==
          "authcookie=4dc1b2b7e6a2f8d1c3b5a79e0f123456&portal=GP_Gateway-N&user=Alice"
          "&domain=%28empty_domain%29&preferred-ip=10.20.30.40&preferred-ipv6=fd00%3a%3a1234"
          "&computer=my-laptop");
}

TEST_CASE("gp gateway login: rejects incomplete or unexpected jnlp") {
    std::string good = gp_fixture("login_jnlp.xml");
    auto replace = [&](std::string_view from, std::string_view to) {
        std::string s = good;
        auto at = s.find(from);
        REQUIRE(at != std::string::npos);
        s.replace(at, from.size(), to);
        return s;
    };
    auto no_cookie = parse_gateway_login_reply(
        replace("<argument>4dc1b2b7e6a2f8d1c3b5a79e0f123456</argument>", "<argument>(null)</argument>"), "h");
    REQUIRE_FALSE(no_cookie.ok());
    CHECK(no_cookie.error().message.find("authcookie") != std::string::npos);
    auto not_tunnel = parse_gateway_login_reply(replace("<argument>tunnel</argument>", "<argument>x</argument>"), "h");
    REQUIRE_FALSE(not_tunnel.ok());
    CHECK(not_tunnel.error().message.find("connection-type") != std::string::npos);
    auto ver = parse_gateway_login_reply(replace("<argument>4100</argument>", "<argument>4000</argument>"), "h");
    REQUIRE_FALSE(ver.ok());
    CHECK(ver.error().message.find("clientVer") != std::string::npos);
    auto short_list = parse_gateway_login_reply(
        "<jnlp><application-desc><argument>(null)</argument><argument>abc</argument></application-desc></jnlp>", "h");
    REQUIRE_FALSE(short_list.ok());
    CHECK(short_list.error().message.find("only 2 jnlp arguments") != std::string::npos);
    auto no_desc = parse_gateway_login_reply("<jnlp/>", "h");
    REQUIRE_FALSE(no_desc.ok());
    CHECK(no_desc.error().message == "missing element <jnlp/application-desc>");
    auto challenge = parse_gateway_login_reply(
        "<challenge><inputstr>t1</inputstr><respmsg>OTP</respmsg></challenge>", "h");
    REQUIRE(challenge.ok());
    CHECK(std::get<GpChallenge>(*challenge).input_str == "t1");
}

TEST_CASE("gp session cookie: round trip through --authenticate / --cookie-on-stdin") {
    GpSessionCookie c;
    c.authcookie = Secret::from_string("a&b=c%d+e");
    c.portal = "GP Gateway";
    c.user = "dom\\user@corp";
    c.domain = "(empty_domain)";
    c.computer = "host,1";
    Secret text = c.encode();
    CHECK(text.reveal_text() ==
          "authcookie=a%26b%3dc%25d%2be&portal=GP%20Gateway&user=dom%5cuser%40corp"
          "&domain=%28empty_domain%29&computer=host%2c1");
    auto back = GpSessionCookie::decode(std::string(text.reveal_text()) + "\n");
    REQUIRE(back.ok());
    CHECK(back->authcookie.equals(c.authcookie));
    CHECK(back->portal == c.portal);
    CHECK(back->user == c.user);
    CHECK(back->domain == c.domain);
    CHECK(back->computer == c.computer);
    CHECK(back->preferred_ip.empty());
    CHECK(back->encode().equals(text));

    GpSessionCookie withips = c.clone();
    withips.preferred_ip = "10.1.2.3";
    withips.preferred_ipv6 = "fd00::1";
    auto back2 = GpSessionCookie::decode(withips.encode().reveal_text());
    REQUIRE(back2.ok());
    CHECK(back2->preferred_ip == "10.1.2.3");
    CHECK(back2->preferred_ipv6 == "fd00::1");

    CHECK(GpSessionCookie::decode("user=a&portal=b").error().message ==
          "session cookie: missing authcookie");
    CHECK(GpSessionCookie::decode("authcookie=x&portal=b").error().message ==
          "session cookie: missing user");
    CHECK(GpSessionCookie::decode("authcookie=x&user=u&colour=blue").error().message ==
          "session cookie: unknown field \"colour\"");
    CHECK_FALSE(GpSessionCookie::decode("authcookie=%zz&user=u").ok());
}

TEST_CASE("gp portal config: the authentication-override cookie lifetime") {
    auto lifetime = [](const std::string& over) -> std::optional<std::chrono::seconds> {
        auto r = parse_portal_config_reply(
            "<policy><gateways><external><list><entry name=\"g\"/></list></external></gateways>"
            "<portal-userauthcookie>abc</portal-userauthcookie>" + over + "</policy>");
        REQUIRE(r.ok());
        return std::get<GpPortalConfig>(*r).cookie_lifetime;
    };
    using std::chrono::seconds;
    CHECK(lifetime("") == std::nullopt);
    CHECK(lifetime("<authentication-override><accept-cookie><cookie-lifetime><lifetime-in-hours>24"
                   "</lifetime-in-hours></cookie-lifetime></accept-cookie></authentication-override>") ==
          seconds(86400));
    CHECK(lifetime("<authentication-override><accept-cookie><cookie-lifetime><lifetime-in-minutes>90"
                   "</lifetime-in-minutes></cookie-lifetime></accept-cookie></authentication-override>") ==
          seconds(5400));
    CHECK(lifetime("<authentication-override><cookie-lifetime><lifetime-in-days>2</lifetime-in-days>"
                   "</cookie-lifetime></authentication-override>") == seconds(2 * 86400));
    // Unreadable, zero or over a year: none (the client's default applies), the login goes on.
    CHECK(lifetime("<authentication-override><accept-cookie><cookie-lifetime><lifetime-in-hours>soon"
                   "</lifetime-in-hours></cookie-lifetime></accept-cookie></authentication-override>") == std::nullopt);
    CHECK(lifetime("<authentication-override><accept-cookie><cookie-lifetime><lifetime-in-days>400"
                   "</lifetime-in-days></cookie-lifetime></accept-cookie></authentication-override>") == std::nullopt);
    CHECK(lifetime("<authentication-override><accept-cookie><cookie-lifetime><lifetime-in-minutes>0"
                   "</lifetime-in-minutes></cookie-lifetime></accept-cookie></authentication-override>") == std::nullopt);
}

namespace {
GpPortalConfig config_of(std::string_view body) {
    auto r = parse_portal_config_reply(body);
    REQUIRE(r.ok());
    REQUIRE(std::holds_alternative<GpPortalConfig>(*r));
    return std::move(std::get<GpPortalConfig>(*r));
}
}  // namespace

TEST_CASE("gp portal config: internal gateways and internal-host-detection (IPv4, IPv6)") {
    auto c = config_of(R"(<policy><gateways>
<external><list><entry name="ext.example"><priority-rule><entry name="Any"><priority>1</priority></entry></priority-rule></entry></list></external>
<internal><list><entry name="in-b.corp.example"><priority>5</priority></entry>
<entry name="in-a.corp.example:4443"><description>HQ</description><priority>2</priority></entry></list></internal></gateways>
<internal-host-detection><ip-address> 10.0.0.1 </ip-address><host>GW.Corp.Example.</host></internal-host-detection>
<internal-host-detection-v6><ip-address>fd00::1</ip-address><host>gw6.corp.example</host></internal-host-detection-v6>
</policy>)");
    REQUIRE(c.internal_host_checks.size() == 2);
    CHECK(c.internal_host_checks[0].address == "10.0.0.1");
    CHECK(c.internal_host_checks[0].host == "GW.Corp.Example");  // the trailing dot goes
    CHECK_FALSE(c.internal_host_checks[0].ipv6);
    CHECK(c.internal_host_checks[1].address == "fd00::1");
    CHECK(c.internal_host_checks[1].host == "gw6.corp.example");
    CHECK(c.internal_host_checks[1].ipv6);
    CHECK(c.internal_host_check_problems.empty());
    CHECK(c.has_gateways(true));
    CHECK(c.has_gateways(false));
    auto outside = c.preferred_gateways("");
    REQUIRE(outside.size() == 1);
    CHECK(outside[0].address == "ext.example");
    auto inside = c.preferred_gateways("", true);
    REQUIRE(inside.size() == 2);
    CHECK(inside[0].address == "in-a.corp.example:4443");  // priority 2 before 5
    CHECK(inside[0].description == "HQ");
    CHECK(inside[1].address == "in-b.corp.example");

    // PAN-OS's other spellings: hostname, and ipv6-address/ipv6-host inside the IPv4 element.
    auto other = config_of(R"(<policy><internal-host-detection><ip-address>192.0.2.7</ip-address>
<hostname>dc1.corp.example</hostname><ipv6-address>2001:db8::7</ipv6-address><ipv6-host>dc1.corp.example</ipv6-host>
</internal-host-detection></policy>)");
    REQUIRE(other.internal_host_checks.size() == 2);
    CHECK(other.internal_host_checks[0].host == "dc1.corp.example");
    CHECK(other.internal_host_checks[1].address == "2001:db8::7");
    CHECK(other.internal_host_checks[1].ipv6);
    // Only internal gateways parse (the session decides whether that is usable).
    auto only_internal =
        config_of("<policy><gateways><internal><list><entry name=\"10.1.1.1\"/></list></internal></gateways></policy>");
    CHECK_FALSE(only_internal.has_gateways(false));
    CHECK(only_internal.preferred_gateways("").empty());
    CHECK(only_internal.preferred_gateways("", true).size() == 1);
}

TEST_CASE("gp portal config: internal-host-detection that cannot be used is reported, not trusted") {
    // A missing name, a missing address, an address that is not one, a name with control
    // characters: each entry is dropped with a reason, the server's text made printable.
    auto c = config_of(R"(<policy>
<internal-host-detection><ip-address>10.0.0.1</ip-address></internal-host-detection>
<internal-host-detection-v6><host>gw6.corp.example</host></internal-host-detection-v6>
</policy>)");
    CHECK(c.internal_host_checks.empty());
    REQUIRE(c.internal_host_check_problems.size() == 2);
    CHECK(c.internal_host_check_problems[0] ==
          "internal-host-detection: no host name for the address \"10.0.0.1\"");
    CHECK(c.internal_host_check_problems[1] ==
          "internal-host-detection-v6: no address (for the host name \"gw6.corp.example\")");

    // XML 1.0 carries no C0 control, but the C1 ones are XML characters: U+009B, a
    // one-character CSI, must reach the message as \xHH, not as itself.
    auto hostile = config_of("<policy><internal-host-detection><ip-address>10.0.0.1;rm -rf /\xc2\x9b" "2J</ip-address>"
                             "<host>gw.corp.example</host></internal-host-detection>"
                             "<internal-host-detection-v6><ip-address>fd00::1</ip-address>"
                             "<host>evil\xc2\x9b" "0m.example</host></internal-host-detection-v6></policy>");
    CHECK(hostile.internal_host_checks.empty());
    REQUIRE(hostile.internal_host_check_problems.size() == 2);
    for (const auto& p : hostile.internal_host_check_problems) CHECK(p.find("\xc2\x9b") == std::string::npos);
    CHECK(hostile.internal_host_check_problems[0] ==
          "internal-host-detection: \"10.0.0.1;rm -rf /\\xc2\\x9b2J\" is not an IP address");
    CHECK(hostile.internal_host_check_problems[1] ==
          "internal-host-detection-v6: \"evil\\xc2\\x9b0m.example\" is not a host name");

    // Empty elements: no detection, nothing to report.
    auto empty = config_of("<policy><internal-host-detection><ip-address/><host/></internal-host-detection></policy>");
    CHECK(empty.internal_host_checks.empty());
    CHECK(empty.internal_host_check_problems.empty());
}

TEST_CASE("gp internal host detection: the name compares in ASCII case, without a trailing dot") {
    CHECK(internal_host_matches("gw.corp.example", "GW.CORP.EXAMPLE"));
    CHECK(internal_host_matches("gw.corp.example", "gw.corp.example."));
    CHECK(internal_host_matches("gw.corp.example.", "gw.corp.example"));
    CHECK_FALSE(internal_host_matches("gw.corp.example", "gw.corp.example.evil"));
    CHECK_FALSE(internal_host_matches("gw.corp.example", "w.corp.example"));
    CHECK_FALSE(internal_host_matches("gw.corp.example", ""));
    CHECK_FALSE(internal_host_matches("", ""));
    CHECK_FALSE(internal_host_matches(".", "."));
}
