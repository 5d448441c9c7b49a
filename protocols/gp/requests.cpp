#include "protocols/gp/requests.h"

#include "protocols/http/form.h"

namespace espvpn::gp {

namespace {
constexpr std::string_view kClientVer = "4100";
const char* yes_no(bool b) { return b ? "yes" : "no"; }
}  // namespace

GpRequest prelogin_request(GpInterface iface, const GpClientInfo& client, bool external_auth) {
    GpRequest r;
    r.path = iface == GpInterface::Portal ? "/global-protect/prelogin.esp" : "/ssl-vpn/prelogin.esp";
    r.query = "tmp=tmp&clientVer=" + std::string(kClientVer) +
              "&clientos=" + http::percent_encode(client.clientos);
    if (external_auth) r.body = Secret::from_string("cas-support=yes");
    return r;
}

GpRequest login_request(GpInterface iface, std::string_view server, const GpClientInfo& client,
                        const GpCredentials& creds) {
    GpRequest r;
    r.path = iface == GpInterface::Portal ? "/global-protect/getconfig.esp" : "/ssl-vpn/login.esp";
    http::FormBody f;
    // The fake server answers 500 unless these five are exactly so.
    f.add("jnlpReady", "jnlpReady").add("ok", "Login").add("direct", "yes");
    f.add("clientVer", kClientVer).add_raw("prot", "https:").add("internal", "no");
    f.add("ipv6-support", yes_no(client.ipv6));
    f.add("clientos", client.clientos).add("os-version", client.os_version);
    f.add("server", server).add("computer", client.computer);
    if (!creds.portal_userauthcookie.empty())
        f.add("portal-userauthcookie", creds.portal_userauthcookie);
    if (!creds.portal_prelogonuserauthcookie.empty())
        f.add("portal-prelogonuserauthcookie", creds.portal_prelogonuserauthcookie);
    if (!creds.preferred_ip.empty()) f.add("preferred-ip", creds.preferred_ip);
    if (!creds.preferred_ipv6.empty()) f.add("preferred-ipv6", creds.preferred_ipv6);
    if (!creds.input_str.empty()) f.add("inputStr", creds.input_str);
    f.add("user", creds.user);
    f.add(creds.secret_field.empty() ? "passwd" : creds.secret_field, creds.secret);
    r.body = f.finish();
    return r;
}

GpRequest getconfig_request(const GpSessionCookie& cookie, const GpClientInfo& client,
                            const GpAlgoOffer& offer, const GpReconnectAddresses* reconnect) {
    GpRequest r;
    r.path = "/ssl-vpn/getconfig.esp";
    http::FormBody f;
    f.add("client-type", "1").add("protocol-version", "p1").add("internal", "no");
    f.add("app-version", client.app_version.empty() ? kDefaultAppVersion : client.app_version);
    f.add("ipv6-support", yes_no(client.ipv6));
    f.add("clientos", client.clientos).add("os-version", client.os_version);
    f.add("hmac-algo", offer.hmac).add("enc-algo", offer.enc);
    if (reconnect) {
        if (!reconnect->ip.empty()) f.add("preferred-ip", reconnect->ip);
        if (!reconnect->ipv6.empty()) f.add("preferred-ipv6", reconnect->ipv6);
    }
    cookie.append_to(f, reconnect == nullptr);
    r.body = f.finish();
    return r;
}

static GpRequest hip_request(std::string_view path, const GpSessionCookie& cookie,
                             std::string_view client_ip, std::string_view client_ipv6,
                             std::string_view last_key, std::string_view last_value) {
    GpRequest r;
    r.path = std::string(path);
    http::FormBody f;
    f.add("client-role", "global-protect-full");
    cookie.append_to(f);
    f.add("client-ip", client_ip);
    if (!client_ipv6.empty()) f.add("client-ipv6", client_ipv6);
    f.add(last_key, last_value);
    r.body = f.finish();
    return r;
}

GpRequest hip_check_request(const GpSessionCookie& cookie, std::string_view client_ip,
                            std::string_view client_ipv6, std::string_view md5) {
    return hip_request("/ssl-vpn/hipreportcheck.esp", cookie, client_ip, client_ipv6, "md5", md5);
}

GpRequest hip_report_request(const GpSessionCookie& cookie, std::string_view client_ip,
                             std::string_view client_ipv6, std::string_view report_xml) {
    return hip_request("/ssl-vpn/hipreport.esp", cookie, client_ip, client_ipv6, "report",
                       report_xml);
}

GpRequest logout_request(const GpSessionCookie& cookie) {
    GpRequest r;
    r.path = "/ssl-vpn/logout.esp";
    r.body = cookie.encode();
    return r;
}

}  // namespace espvpn::gp
