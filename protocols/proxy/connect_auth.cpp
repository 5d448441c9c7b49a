#include "protocols/proxy/connect_auth.h"

#include <nettle/base64.h>

#include <cctype>

#include "protocols/http/secret_buffer.h"
#include "protocols/proxy/ntlm.h"

namespace espvpn::proxy {

namespace {

// The value's scheme ("NTLM", "Basic realm=..."), compared case-insensitively.
bool has_scheme(const std::string& value, std::string_view scheme) {
    if (value.size() < scheme.size()) return false;
    for (std::size_t i = 0; i < scheme.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(value[i])) != std::tolower(static_cast<unsigned char>(scheme[i])))
            return false;
    return value.size() == scheme.size() || value[scheme.size()] == ' ';
}

bool offers(const ConnectReply& r, std::string_view scheme) {
    for (const auto& a : r.authenticate)
        if (has_scheme(a, scheme)) return true;
    return false;
}

std::string schemes(const ConnectReply& r) {
    std::string out;
    for (const auto& a : r.authenticate) out += (out.empty() ? "" : ", ") + a.substr(0, a.find(' '));
    return out;
}

Secret ntlm_header(std::span<const std::uint8_t> message) {
    Secret encoded(BASE64_ENCODE_RAW_LENGTH(message.size()));
    nettle_base64_encode_raw(reinterpret_cast<char*>(encoded.reveal_mutable().data()), message.size(), message.data());
    http::SecretBuffer out;
    out.append("NTLM ");
    out.append(encoded);
    return out.take_secret();
}

}  // namespace

ConnectAuth::ConnectAuth(const ProxySpec& spec, ProxyAuthMethods methods, std::string host, std::uint16_t port)
    : spec_(spec.clone()), methods_(std::move(methods)), host_(std::move(host)), port_(port) {}

Secret ConnectAuth::first_request() {
    // --proxy-auth=basic alone: no other method to wait for, send it at once (saves a
    // round trip, and tinyproxy closes the connection after its refusal anyway).
    if (methods_.basic && !methods_.ntlm && !spec_.user.empty()) {
        state_ = State::basic_sent;
        basic_tried_ = true;
        Secret auth = basic_credentials(spec_);
        return build_connect_request(host_, port_, &auth);
    }
    return build_connect_request(host_, port_, nullptr);
}

const char* ConnectAuth::method() const {
    switch (state_) {
        case State::basic_sent: return "Basic";
        case State::ntlm_negotiate_sent:
        case State::ntlm_authenticate_sent: return "NTLM";
        case State::none: break;
    }
    return "none";
}

ConnectAuth::Step ConnectAuth::send(Secret authorization, bool reusable) {
    Step s;
    s.kind = reusable ? Step::Kind::send : Step::Kind::reconnect_then_send;
    s.request = build_connect_request(host_, port_, &authorization);
    return s;
}

ConnectAuth::Step ConnectAuth::fail(const ConnectReply& r, std::string why) const {
    Step s;
    s.error = "proxy " + spec_.display() + " refused the connection to " + host_ + ":" + std::to_string(port_) + ": " +
              std::to_string(r.status) + " " + r.reason;
    if (!why.empty()) s.error += " (" + why + ")";
    return s;
}

ConnectAuth::Step ConnectAuth::on_refusal(const ConnectReply& r, bool reusable, std::uint64_t filetime,
                                          std::span<const std::uint8_t, 8> client_challenge) {
    if (r.status != 407 && r.status != 401) return fail(r, "");  // 407 per RFC 9110; tinyproxy answers 401
    const State was = state_;

    if (was == State::ntlm_negotiate_sent) {
        // The challenge, on this same connection: NTLM authenticates the connection.
        std::string token;
        for (const auto& a : r.authenticate)
            if (has_scheme(a, "NTLM") && a.size() > 5) token = a.substr(5);
        while (!token.empty() && token.front() == ' ') token.erase(0, 1);
        while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.pop_back();
        if (token.empty()) return fail(r, "the proxy answered the NTLM negotiation without a challenge");
        if (!reusable)
            return fail(r, "the proxy closed the connection after its NTLM challenge; NTLM needs the connection "
                           "kept alive");
        auto bytes = ntlm::decode_token(token);
        if (!bytes) return fail(r, bytes.error().message);
        auto challenge = ntlm::parse_challenge(*bytes);
        if (!challenge) return fail(r, challenge.error().message);
        auto identity = ntlm::split_user(spec_.user, *challenge);
        if (!identity) return fail(r, identity.error().message);
        auto message = ntlm::authenticate_message(*challenge, *identity, spec_.password, "ESPVPN", filetime,
                                                  client_challenge);
        if (!message) return fail(r, message.error().message);
        state_ = State::ntlm_authenticate_sent;
        return send(ntlm_header(message->reveal()), true);
    }

    const bool has_user = !spec_.user.empty();
    if (!ntlm_tried_ && methods_.ntlm && has_user && offers(r, "NTLM")) {
        ntlm_tried_ = true;
        state_ = State::ntlm_negotiate_sent;
        return send(ntlm_header(ntlm::negotiate_message()), reusable);
    }
    if (!basic_tried_ && methods_.basic && has_user && offers(r, "Basic")) {
        basic_tried_ = true;
        state_ = State::basic_sent;
        return send(basic_credentials(spec_), reusable);
    }

    // Nothing left to try: say why, in the terms the user can act on.
    const std::string offered = schemes(r);
    std::string why;
    if (was == State::ntlm_authenticate_sent)
        why = "NTLM authentication as user '" + spec_.user + "' was not accepted";
    else if (was == State::basic_sent)
        why = "the user name and password for user '" + spec_.user + "' were not accepted";
    else if (!has_user)
        why = "it wants " + (offered.empty() ? std::string("authentication") : offered) +
              ": give --proxy http://USER:PASS@host:port/";
    else if (offers(r, "Basic") && !methods_.basic)
        why = "Basic authentication sends the password in clear and is off unless --proxy-auth=basic, as in openconnect";
    else if (offers(r, "NTLM") && !methods_.ntlm)
        why = "the proxy offers NTLM, which --proxy-auth does not list";
    if (!offered.empty() && !offers(r, "Basic") && !offers(r, "NTLM"))
        why += std::string(why.empty() ? "" : "; ") + "espvpn answers Basic and NTLM, the proxy offers " + offered;
    return fail(r, why);
}

}  // namespace espvpn::proxy
