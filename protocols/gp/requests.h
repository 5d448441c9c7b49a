// Request builders for every GlobalProtect HTTPS endpoint. Each returns a
// description (method, path, query, form body); the session layer sends it.
// Field order and encoding follow OpenConnect byte for byte, because the
// servers are picky and OC is what they are known to accept.
#pragma once

#include <string>
#include <string_view>

#include "crypto/secret.h"
#include "protocols/gp/session_cookie.h"

namespace espvpn::gp {

struct GpRequest {
    std::string method = "POST";
    std::string path;
    std::string query;  // already encoded, without '?'
    Secret body;        // application/x-www-form-urlencoded; may hold a password
    std::string target() const { return query.empty() ? path : path + "?" + query; }
};

inline constexpr std::string_view kFormContentType = "application/x-www-form-urlencoded";
inline constexpr std::string_view kUserAgent = "PAN GlobalProtect";  // OC; others get redirected
inline constexpr std::string_view kDefaultAppVersion = "6.3.0-33";

// Who we claim to be. OC sends its platform name as os-version.
struct GpClientInfo {
    std::string clientos = "Linux";      // Windows, Linux, Mac
    std::string os_version = "linux-64";
    std::string computer;                // local host name; part of the session cookie
    std::string app_version = std::string(kDefaultAppVersion);  // portal <version> when known
    bool ipv6 = true;
};

enum class GpInterface { Portal, Gateway };

// POST {/global-protect|/ssl-vpn}/prelogin.esp?tmp=tmp&clientVer=4100&clientos=OS,
// body "cas-support=yes" (empty with external auth off).
GpRequest prelogin_request(GpInterface iface, const GpClientInfo& client, bool external_auth = true);

struct GpCredentials {
    std::string user;  // empty with client-certificate-only auth
    Secret secret;     // password, OTP, or the SAML cookie
    // The form field that carries `secret`: "passwd", or for a SAML hand-off
    // "prelogin-cookie" / "portal-userauthcookie" (the ACS header's name).
    std::string secret_field = "passwd";
    std::string input_str;  // the token of the challenge being answered
    // Cookies from the portal config; sent only when non-empty.
    Secret portal_userauthcookie;
    Secret portal_prelogonuserauthcookie;
    std::string preferred_ip;
    std::string preferred_ipv6;
};

// Portal: POST /global-protect/getconfig.esp. Gateway: POST /ssl-vpn/login.esp.
// `server` is the host name the request goes to.
GpRequest login_request(GpInterface iface, std::string_view server, const GpClientInfo& client,
                        const GpCredentials& creds);

// What we offer for ESP in getconfig.
struct GpAlgoOffer {
    std::string enc;
    std::string hmac;
};
inline const GpAlgoOffer kOcAlgoOffer{"aes-128-cbc,aes-256-cbc", "sha1,md5,sha256"};
inline const GpAlgoOffer kWindowsAlgoOffer{"aes-256-gcm,aes-128-gcm,aes-128-cbc,", "sha1,"};

// POST /ssl-vpn/getconfig.esp. On a reconnect pass the addresses held now;
// they replace the preferred-ip fields of the cookie.
struct GpReconnectAddresses {
    std::string ip;
    std::string ipv6;
};
GpRequest getconfig_request(const GpSessionCookie& cookie, const GpClientInfo& client,
                            const GpAlgoOffer& offer = kOcAlgoOffer,
                            const GpReconnectAddresses* reconnect = nullptr);

// POST /ssl-vpn/hipreportcheck.esp; `md5` as hip_report_md5().
GpRequest hip_check_request(const GpSessionCookie& cookie, std::string_view client_ip,
                            std::string_view client_ipv6, std::string_view md5);
// POST /ssl-vpn/hipreport.esp with the report XML.
GpRequest hip_report_request(const GpSessionCookie& cookie, std::string_view client_ip,
                             std::string_view client_ipv6, std::string_view report_xml);
// POST /ssl-vpn/logout.esp: the whole session cookie.
GpRequest logout_request(const GpSessionCookie& cookie);

}  // namespace espvpn::gp
