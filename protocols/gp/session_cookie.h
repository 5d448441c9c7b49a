// The gateway login reply (a <jnlp> argument list) and the session cookie the
// client builds from it (docs/protocols/globalprotect.md §6): the URL-encoded string
//   authcookie=..&portal=..&user=..&domain=..[&preferred-ip=..][&preferred-ipv6=..]&computer=..
// that every later gateway request carries unchanged. The same string is
// what `--authenticate` prints and `--cookie-on-stdin` reads back.
#pragma once

#include <string>

#include "crypto/secret.h"
#include "protocols/gp/auth_reply.h"
#include "protocols/http/form.h"

namespace espvpn::gp {

struct GpSessionCookie {
    Secret authcookie;
    std::string portal;
    std::string user;
    std::string domain;
    std::string preferred_ip;
    std::string preferred_ipv6;
    std::string computer;

    // The URL-encoded cookie string, as a Secret (it carries authcookie).
    Secret encode() const;
    // Appends the fields in cookie order; with_preferred=false leaves out
    // preferred-ip/-ipv6 (a reconnect sends the current addresses instead).
    void append_to(http::FormBody& form, bool with_preferred = true) const;
    // The string OC hashes for the HIP md5: the cookie without authcookie,
    // preferred-ip and preferred-ipv6.
    std::string hip_md5_input() const;
    // Parses a cookie string back; requires authcookie, user and computer is
    // optional (an old cookie may lack it). Unknown fields are rejected so a
    // typo does not silently drop a field the gateway checks.
    static Result<GpSessionCookie> decode(std::string_view text);
    GpSessionCookie clone() const;
};

// Everything the jnlp reply carries that the client uses or shows.
struct GpLoginResult {
    GpSessionCookie cookie;  // computer is filled from the request
    std::string authentication_source;
    std::string configuration;  // vsys1
    std::string password_expiration_days;
    std::string portal_userauthcookie_echo;
};

// `computer`: the local host name sent in the login request.
Result<GpLoginResult> parse_gateway_login(const xml::Document& doc, std::string_view computer);
Result<GpAuthOutcome<GpLoginResult>> parse_gateway_login_reply(std::string_view body,
                                                               std::string_view computer);

}  // namespace espvpn::gp
