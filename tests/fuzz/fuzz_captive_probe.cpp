// libFuzzer target: the captive-portal probe's verdict (protocols/captive), which judges what
// an untrusted network answers. The first byte picks the status class, the rest is split at
// the first NUL into a Location and a body; a --captive-probe text is parsed too. Any input
// gives a verdict whose portal URL is printable ASCII (it reaches a terminal and a browser),
// never a crash.
#include <string_view>

#include "protocols/captive/captive_probe.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    (void)captive::parse_probe_spec(all);
    if (size < 1) return 0;
    static const int kStatus[] = {200, 204, 301, 302, 303, 307, 308, 404, 500};
    captive::ProbeAnswer a;
    a.status = kStatus[data[0] % (sizeof kStatus / sizeof kStatus[0])];
    const std::string_view rest = all.substr(1);
    const auto nul = rest.find('\0');
    a.location = std::string(rest.substr(0, nul));
    if (nul != std::string_view::npos) a.body = std::string(rest.substr(nul + 1));
    a.truncated = (data[0] & 0x80) != 0;
    const captive::Verdict v = captive::classify(captive::default_probe_spec(), a);
    if (v.portal_url.size() > 3 * captive::kMaxPortalUrl) __builtin_trap();
    for (unsigned char c : v.portal_url)
        if (c <= 0x20 || c >= 0x7f) __builtin_trap();
    for (unsigned char c : v.why)
        if (c < 0x20 || c >= 0x7f) __builtin_trap();
    return 0;
}
