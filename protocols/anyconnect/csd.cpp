#include "protocols/anyconnect/csd.h"

#include "protocols/base/ascii.h"
#include "protocols/xml/document.h"

namespace espvpn::anyconnect {

std::optional<AcHostScan> parse_host_scan(const xml::Node& config_auth) {
    xml::Node hs = config_auth.child("host-scan");
    if (!hs) return std::nullopt;
    AcHostScan s;
    s.ticket = hs.child_text_or_empty("host-scan-ticket");
    s.token = hs.child_text_or_empty("host-scan-token");
    s.base_uri = hs.child_text_or_empty("host-scan-base-uri");
    s.wait_uri = hs.child_text_or_empty("host-scan-wait-uri");
    if (s.ticket.empty() || s.token.empty() || s.base_uri.empty() || s.wait_uri.empty()) return std::nullopt;
    return s;
}

namespace {

std::string quoted(const std::string& v) { return "\"" + v + "\""; }

// openconnect 9.01 prints the MD5 fingerprints in upper-case hex ("%02X").
std::string upper(std::string v) {
    for (char& c : v)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return v;
}

}  // namespace

Result<CsdCommand> csd_wrapper_command(const AcHostScan& scan, const CsdInputs& in) {
    if (in.wrapper.empty())
        return make_error("the server asks for a Cisco Secure Desktop host scan: give a program for it with --csd-wrapper");
    constexpr std::string_view kPin = "pin-sha256:";
    if (in.server_pin.rfind(kPin, 0) != 0) return make_error("CSD: no pin-sha256 of the server's key");
    CsdCommand c;
    c.argv = {in.wrapper,
              "",  // the stub's file name: none (openconnect passes "" when it runs a wrapper without the stub)
              "-ticket", quoted(scan.ticket),
              "-stub", quoted("0"),
              "-group", quoted(in.authgroup),
              "-certhash", quoted(upper(in.server_cert_md5) + ":" + upper(in.client_cert_md5)),
              "-url", quoted("https://" + in.server_host + scan.base_uri),
              "-langselen"};
    c.env = {{"CSD_SHA256", in.server_pin.substr(kPin.size())},
             {"CSD_TOKEN", scan.token},
             {"CSD_HOSTNAME", in.server_host}};
    return c;
}

std::string csd_wait_path(const AcHostScan& scan) {
    return scan.wait_uri.empty() || scan.wait_uri[0] != '/' ? "/" + scan.wait_uri : scan.wait_uri;
}

CsdWait classify_wait_page(std::string_view body) {
    if (body.rfind("<?xml", 0) == 0) return CsdWait::done;
    if (ascii_lower(body).find("http-equiv=\"refresh\"") != std::string::npos) return CsdWait::refresh;
    return CsdWait::unknown;
}

}  // namespace espvpn::anyconnect
