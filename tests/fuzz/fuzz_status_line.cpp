// libFuzzer target: the status socket's lines (protocols/status). The bytes are read as a
// client's request (the session's side: a hostile local client) and as a reply (the
// `espvpn status` side); a reply that parses is written back and must parse the same.
#include <string_view>

#include "protocols/status/status_protocol.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view line(reinterpret_cast<const char*>(data), size);
    (void)status::parse_request(line);
    auto reply = status::parse_reply(line);
    if (!reply || !reply->status) return 0;
    const std::string again = status::status_reply(*reply->status);
    auto round = status::parse_reply(std::string_view(again).substr(0, again.size() - 1));
    if (!round || !round->status || round->status->state != reply->status->state ||
        round->status->bytes_in != reply->status->bytes_in || round->status->expires != reply->status->expires)
        __builtin_trap();
    return 0;
}
