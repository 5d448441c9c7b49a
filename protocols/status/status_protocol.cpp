#include "protocols/status/status_protocol.h"

#include <nlohmann/json.hpp>

#include <type_traits>

namespace espvpn::status {

using nlohmann::json;

namespace {

// Invalid UTF-8 (server text in last_error) is replaced, never a throw.
std::string line_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

// One JSON object from a line, or nullopt (no exceptions: the text is untrusted).
std::optional<json> object_of(std::string_view line) {
    json j = json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

template <class T>
bool get(const json& j, const char* key, T& out) {
    auto it = j.find(key);
    if (it == j.end()) return true;  // optional member
    if constexpr (std::is_same_v<T, std::string>) {
        if (!it->is_string()) return false;
    } else if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean()) return false;
    } else if constexpr (std::is_unsigned_v<T>) {
        if (!it->is_number_unsigned()) return false;
    } else {
        if (!it->is_number_integer()) return false;
    }
    out = it->get<T>();
    return true;
}

}  // namespace

const char* state_name(State s) {
    switch (s) {
        case State::off: return "off";
        case State::connecting: return "connecting";
        case State::connected: return "connected";
        case State::reconnecting: return "reconnecting";
        case State::needs_login: return "needs-login";
        case State::trusted_network: return "trusted-network";
        case State::captive_portal: return "captive-portal";
    }
    return "off";
}

std::optional<State> state_from_name(std::string_view name) {
    for (State s : {State::off, State::connecting, State::connected, State::reconnecting, State::needs_login,
                    State::trusted_network, State::captive_portal})
        if (name == state_name(s)) return s;
    return std::nullopt;
}

const char* request_name(Request r) {
    switch (r) {
        case Request::status: return "status";
        case Request::disconnect: return "disconnect";
        case Request::reconnect: return "reconnect";
    }
    return "status";
}

Result<Request> parse_request(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxRequestLine) return make_error("request too long");
    auto j = object_of(line);
    if (!j) return make_error("not a JSON object");
    auto it = j->find("request");
    if (it == j->end() || !it->is_string()) return make_error("no \"request\" member");
    const std::string& name = it->get_ref<const std::string&>();
    for (Request r : {Request::status, Request::disconnect, Request::reconnect})
        if (name == request_name(r)) return r;
    return make_error("unknown request (status, disconnect, reconnect)");
}

std::string request_line(Request r) { return line_of(json{{"request", request_name(r)}}); }

std::string status_reply(const Snapshot& s) {
    json j = {{"ok", true},
              {"state", state_name(s.state)},
              {"protocol", s.protocol},
              {"gateway", s.gateway},
              {"transport", s.transport},
              {"interface", s.interface_name},
              {"since", s.since},
              {"bytes_in", s.bytes_in},
              {"bytes_out", s.bytes_out},
              {"last_error", s.last_error},
              {"always_on", s.always_on},
              {"portal", s.portal}};
    j["expires"] = s.expires > 0 ? json(s.expires) : json(nullptr);
    return line_of(j);
}

std::string ok_reply(std::string_view message) { return line_of(json{{"ok", true}, {"message", message}}); }
std::string error_reply(std::string_view message) { return line_of(json{{"ok", false}, {"error", message}}); }

Result<Reply> parse_reply(std::string_view line) {
    auto j = object_of(line);
    if (!j) return make_error("the reply is not a JSON object");
    Reply r;
    if (!get(*j, "ok", r.ok) || !get(*j, "error", r.error) || !get(*j, "message", r.message))
        return make_error("the reply has a member of the wrong type");
    if (!r.ok || !j->contains("state")) return r;
    Snapshot s;
    std::string state;
    if (!get(*j, "state", state) || !get(*j, "protocol", s.protocol) || !get(*j, "gateway", s.gateway) ||
        !get(*j, "transport", s.transport) || !get(*j, "interface", s.interface_name) || !get(*j, "since", s.since) ||
        !get(*j, "bytes_in", s.bytes_in) || !get(*j, "bytes_out", s.bytes_out) ||
        !get(*j, "last_error", s.last_error) || !get(*j, "always_on", s.always_on) || !get(*j, "portal", s.portal))
        return make_error("the status reply has a member of the wrong type");
    if (auto e = j->find("expires"); e != j->end() && !e->is_null() && !get(*j, "expires", s.expires))
        return make_error("the status reply's expires is not a number");
    if (s.expires < 0) s.expires = 0;  // not known
    auto st = state_from_name(state);
    if (!st) return make_error("the status reply names an unknown state");
    s.state = *st;
    r.status = s;
    return r;
}

}  // namespace espvpn::status
