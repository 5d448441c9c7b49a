// What a GlobalProtect server may answer to any auth-related request
// (prelogin, portal getconfig, gateway login/getconfig, HIP, logout): an XML
// document, an XML or plain-text error, or a 2FA challenge in one of three
// shapes (bare JavaScript, JavaScript inside HTML, <challenge> XML). The
// server gives no hint which one it sends, so every reply goes through
// classify_reply() first.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "protocols/base/result.h"
#include "protocols/xml/document.h"

namespace espvpn::gp {

// A 2FA round: show `prompt`, then repeat the same request with the answer
// as `passwd` and `input_str` as `inputStr`.
struct GpChallenge {
    std::string prompt;
    std::string input_str;
};

enum class GpErrorKind {
    Other,
    AuthFailed,          // bad credentials: ask again
    CookieRejected,      // authcookie expired/bogus: log in again, do not retry
    WrongInterface,      // "portal/gateway does not exist": try the other one
    ClientCertRequired,  // fatal without a certificate
};

struct GpServerError {
    std::string message;
    GpErrorKind kind = GpErrorKind::Other;
};

GpErrorKind classify_error_message(std::string_view message);

// A parsed reply: a document that is not an error, a challenge, or an error.
using GpReply = std::variant<xml::Document, GpChallenge, GpServerError>;

// Fails only when the body is none of the known shapes (then the error says
// why, e.g. "not XML: ...").
Result<GpReply> classify_reply(std::string_view body);

// The outcome of a request whose success payload is T.
template <class T>
using GpAuthOutcome = std::variant<T, GpChallenge, GpServerError>;

// Parses the JavaScript challenge/error snippet (shape 4; shape 5 after
// html_body_text). Exposed for tests and for the SAML result pages.
Result<std::variant<GpChallenge, GpServerError>> parse_js_reply(std::string_view text);

// Text content of an HTML page's <body>, tags dropped, entities decoded.
std::string html_body_text(std::string_view html);

// Runs classify_reply and hands a document to `parse`; challenges and errors
// pass through unchanged.
template <class T, class Parse>
Result<GpAuthOutcome<T>> parse_outcome(std::string_view body, Parse&& parse) {
    auto reply = classify_reply(body);
    if (!reply) return reply.error();
    if (auto* c = std::get_if<GpChallenge>(&*reply)) return GpAuthOutcome<T>(std::move(*c));
    if (auto* e = std::get_if<GpServerError>(&*reply)) return GpAuthOutcome<T>(std::move(*e));
    Result<T> parsed = parse(std::get<xml::Document>(*reply));
    if (!parsed) return parsed.error();
    return GpAuthOutcome<T>(std::move(*parsed));
}

}  // namespace espvpn::gp
