// Sends GlobalProtect requests (protocols/gp builders) over one HttpsClient:
// the headers every GP request carries, the HTTP status rules GP servers use
// (200, or 512 with an auth-failed body), and --dump-http-traffic with every
// credential-bearing field redacted.
#pragma once

#include <string>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "protocols/gp/requests.h"
#include "protocols/http/url.h"
#include "src/io/https_client.h"

namespace espvpn::session {

struct GpReplyBody {
    int status = 0;
    Secret body;              // may carry an authcookie or ESP keys
    std::string pan_reason;   // X-Private-Pan-Globalprotect, e.g. "auth-failed"
    http::Url url;            // where the reply came from (after redirects)
};

class GpRequestSender {
public:
    GpRequestSender(io::HttpsClient& https, std::string user_agent, bool dump_traffic)
        : https_(https), user_agent_(std::move(user_agent)), dump_(dump_traffic) {}

    // POSTs `request` to `server`. Redirects are followed only for prelogin, as
    // OpenConnect does. A status other than 200/512 is an error naming the path.
    Result<GpReplyBody> send(const http::Url& server, const gp::GpRequest& request, bool follow_redirects = false);

    io::HttpsClient& https() { return https_; }

private:
    io::HttpsClient& https_;
    std::string user_agent_;
    bool dump_;
};

// "field=value&..." with the values of credential fields replaced by <redacted>,
// for logs. Names not known to be harmless are redacted too.
std::string redacted_form(std::string_view form);

}  // namespace espvpn::session
