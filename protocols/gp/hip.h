// Host Information Profile: the check/submit replies and a generator for a
// plausible report (docs/protocols/globalprotect.md §8). Most gateways only want *a* report whose
// md5-sum matches the md5 sent in the check.
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "protocols/gp/auth_reply.h"
#include "protocols/gp/session_cookie.h"

namespace espvpn::gp {

// OC's md5: MD5 (lowercase hex) of the cookie without authcookie and the
// preferred addresses; stable for a session, which is all the server needs.
std::string hip_report_md5(const GpSessionCookie& cookie);

// <response status="success"><hip-report-needed>yes|no</hip-report-needed>...
Result<bool> parse_hip_check(const xml::Document& doc);
Result<GpAuthOutcome<bool>> parse_hip_check_reply(std::string_view body);

// hipreport.esp and logout.esp answer <response status="success">; errors
// come back as GpServerError.
struct GpAck {};
Result<GpAuthOutcome<GpAck>> parse_ack_reply(std::string_view body);

struct GpHipNetworkInterface {
    std::string name = "eth0";
    std::string description = "eth0";
    std::string mac_address = "00-00-00-00-00-00";
    std::vector<std::string> ipv4;
    std::vector<std::string> ipv6;
};

struct GpHipReportInfo {
    std::string md5;  // = the md5 sent in hipreportcheck
    std::string user_name;
    std::string domain;
    std::string host_name;  // = computer
    std::string host_id;
    std::string ip_address;
    std::string ipv6_address;
    std::string client_version = "6.3.0-33";
    std::string os = "Linux";
    std::string os_vendor = "Linux";
    std::time_t generate_time = 0;  // UTC
    std::vector<GpHipNetworkInterface> interfaces;

    // Fills md5, user, domain, host name and addresses from a session.
    static GpHipReportInfo from_session(const GpSessionCookie& cookie, std::string_view client_ip,
                                        std::string_view client_ipv6, std::time_t now);
};

// The report XML: <hip-report name="hip-report"> with host-info and empty
// security-product categories.
std::string build_hip_report(const GpHipReportInfo& info);

// "MM/DD/YYYY HH:MM:SS" in UTC, the format generate-time uses.
std::string hip_time(std::time_t t);

}  // namespace espvpn::gp
