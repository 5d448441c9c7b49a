#include "src/session/gp/request_sender.h"

#include "protocols/http/form.h"
#include "src/log/logger.h"

namespace espvpn::session {

namespace {

// Form fields whose values are safe to log; everything else is redacted.
bool harmless_field(std::string_view name) {
    static constexpr std::string_view kHarmless[] = {
        "tmp", "clientVer", "clientos", "os-version", "cas-support", "jnlpReady", "ok", "direct", "prot",
        "internal", "ipv6-support", "server", "computer", "user", "portal", "domain", "preferred-ip",
        "preferred-ipv6", "client-type", "protocol-version", "app-version", "hmac-algo", "enc-algo",
        "client-role", "client-ip", "client-ipv6", "md5", "host-id", "clientgpversion", "selection-type",
        "default-browser", "host", "gateway-name", "connect-method", "serialno"};
    for (auto h : kHarmless)
        if (h == name) return true;
    return false;
}

}  // namespace

std::string redacted_form(std::string_view form) {
    std::string out;
    while (!form.empty()) {
        auto amp = form.find('&');
        auto pair = form.substr(0, amp);
        auto eq = pair.find('=');
        auto name = pair.substr(0, eq);
        if (!out.empty()) out += '&';
        out += name;
        if (eq != std::string_view::npos) {
            out += '=';
            if (harmless_field(name)) out += pair.substr(eq + 1);
            else out += "<redacted>";
        }
        if (amp == std::string_view::npos) break;
        form.remove_prefix(amp + 1);
    }
    return out;
}

Result<GpReplyBody> GpRequestSender::send(const http::Url& server, const gp::GpRequest& request, bool follow_redirects) {
    http::Request req;
    req.method = request.method;
    req.target = request.target();
    req.host = server.host;
    req.port = server.port;
    req.headers.add("User-Agent", user_agent_);
    if (request.method == "POST") req.headers.add("Content-Type", std::string(gp::kFormContentType));
    req.body = request.body.clone();

    if (dump_) {
        LOG_DEBUG << "> " << req.method << " " << server.host << ":" << server.port << request.path
                  << (request.query.empty() ? "" : "?" + redacted_form(request.query));
        io::HttpsClient::dump_headers(req.headers);
        if (!request.body.empty()) LOG_DEBUG << "> body: " << redacted_form(request.body.reveal_text());
    }

    auto response = https_.send(std::move(req), follow_redirects ? io::Redirects::follow : io::Redirects::no);
    if (!response) return make_error(request.path + " on " + server.host + ": " + response.error().message);

    GpReplyBody reply;
    reply.status = response->status;
    reply.url = https_.last_url();
    if (auto reason = response->headers.get("X-Private-Pan-Globalprotect")) reply.pan_reason = std::string(*reason);
    if (dump_) {
        io::HttpsClient::dump_response_head(*response);
        LOG_DEBUG << "< body: " << response->body.size() << " bytes (content not logged: it may hold cookies or keys)";
    }
    // 512 is GlobalProtect's "authentication failed"; its body says why.
    if (response->status != 200 && response->status != 512) {
        std::string what = "HTTP " + std::to_string(response->status);
        if (!response->reason.empty()) what += " " + response->reason;
        if (!reply.pan_reason.empty()) what += " (" + reply.pan_reason + ")";
        return make_error(request.path + " on " + server.host + " answered " + what);
    }
    reply.body = std::move(response->body);
    return reply;
}

}  // namespace espvpn::session
