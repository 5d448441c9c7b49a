// Cisco Secure Desktop (CSD, "host scan"): a server may ask the client to run a
// program before the login goes on. Its request comes in the <host-scan> element
// of a config-auth reply; the program is the user's --csd-wrapper, run as
// openconnect runs it (the same arguments, quoted the same way, and CSD_TOKEN /
// CSD_HOSTNAME / CSD_SHA256 in its environment); afterwards the client sends the
// token as the "sdesktop" cookie, fetches the wait page until the scan is done, then
// sends its init again. Sans-IO: what to run
// and what to fetch; src/session/anyconnect/login.cpp runs it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn::xml {
class Node;
}

namespace espvpn::anyconnect {

struct AcHostScan {
    std::string ticket;    // <host-scan-ticket>
    std::string token;     // <host-scan-token>: the sdesktop cookie afterwards
    std::string base_uri;  // <host-scan-base-uri>: the -url the program reports to
    std::string wait_uri;  // <host-scan-wait-uri>: fetched once the program has run
};

// The <host-scan> child of a <config-auth> element, if it names all four parts
// (openconnect runs the program only then).
std::optional<AcHostScan> parse_host_scan(const xml::Node& config_auth);

// What the wrapper is run with.
struct CsdInputs {
    std::string wrapper;          // --csd-wrapper
    std::string server_host;      // the host the login talks to (CSD_HOSTNAME, -url)
    std::string authgroup;        // --authgroup ("" when none)
    std::string server_cert_md5;  // hex MD5 of the server's certificate (DER)
    std::string client_cert_md5;  // hex MD5 of the client certificate, "" without one
    std::string server_pin;       // "pin-sha256:BASE64" of the server's key
};

struct CsdCommand {
    std::vector<std::string> argv;                            // argv[0] = the wrapper
    std::vector<std::pair<std::string, std::string>> env;     // added to the environment
};

// openconnect's command line for the wrapper: WRAPPER "" -ticket "T" -stub "0" -group "G"
// -certhash "S:C" (the MD5s in upper-case hex, as openconnect) -url "https://HOST/BASE" -langselen (the values in double quotes, as the
// CSD stub expects), with CSD_TOKEN, CSD_HOSTNAME and CSD_SHA256 (the pin's base64 part).
Result<CsdCommand> csd_wrapper_command(const AcHostScan& scan, const CsdInputs& in);

// The wait page's path once the program has run (openconnect drops one leading '/').
std::string csd_wait_path(const AcHostScan& scan);

// What the wait page says (openconnect's reading): XML ("<?xml" first) when the scan is done,
// an HTML page with a meta refresh while it is not (fetch it again a second later), else
// something the client cannot use. Once done the login starts again with the init document.
enum class CsdWait { done, refresh, unknown };
CsdWait classify_wait_page(std::string_view body);

}  // namespace espvpn::anyconnect
