#include "protocols/gp/hip.h"

#include <nettle/md5.h>

#include <cstdio>

#include "protocols/base/hex.h"
#include "protocols/xml/escape.h"

namespace espvpn::gp {

namespace {

// A tiny writer that keeps indentation and escaping in one place.
class XmlWriter {
public:
    void open(std::string_view name, std::string_view attr_name = {}, std::string_view attr = {}) {
        indent();
        out_ += '<';
        out_ += name;
        if (!attr_name.empty()) {
            out_ += ' ';
            out_ += attr_name;
            out_ += "=\"" + xml::escape(attr) + '"';
        }
        out_ += ">\n";
        stack_.emplace_back(name);
    }
    void close() {
        std::string name = stack_.back();
        stack_.pop_back();
        indent();
        out_ += "</" + name + ">\n";
    }
    void leaf(std::string_view name, std::string_view value) {
        indent();
        out_ += '<';
        out_ += name;
        out_ += '>' + xml::escape(value) + "</";
        out_ += name;
        out_ += ">\n";
    }
    void empty_entry(std::string_view name) {
        indent();
        out_ += "<entry name=\"" + xml::escape(name) + "\"/>\n";
    }
    std::string finish() { return std::move(out_); }

private:
    void indent() { out_.append(2 * stack_.size(), ' '); }
    std::string out_;
    std::vector<std::string> stack_;
};

}  // namespace

std::string hip_report_md5(const GpSessionCookie& cookie) {
    std::string input = cookie.hip_md5_input();
    md5_ctx ctx;
    md5_init(&ctx);
    md5_update(&ctx, input.size(), reinterpret_cast<const std::uint8_t*>(input.data()));
    std::uint8_t digest[MD5_DIGEST_SIZE];
    md5_digest(&ctx, sizeof digest, digest);
    return hex_encode(digest);
}

Result<bool> parse_hip_check(const xml::Document& doc) {
    if (auto st = doc.expect_root("response"); !st) return st.error();
    auto needed = doc.require("hip-report-needed");
    if (!needed) return needed.error();
    std::string v = needed->text();
    if (v == "yes") return true;
    if (v == "no") return false;
    return make_error("hipreportcheck: hip-report-needed is \"" + v + "\", expected yes or no");
}

Result<GpAuthOutcome<bool>> parse_hip_check_reply(std::string_view body) {
    return parse_outcome<bool>(body, parse_hip_check);
}

Result<GpAuthOutcome<GpAck>> parse_ack_reply(std::string_view body) {
    return parse_outcome<GpAck>(body, [](const xml::Document& doc) -> Result<GpAck> {
        if (auto st = doc.expect_root("response"); !st) return st.error();
        std::string status = doc.root().attribute("status").value_or("");
        if (status != "success")
            return make_error("reply status is \"" + status + "\", expected \"success\"");
        return GpAck{};
    });
}

GpHipReportInfo GpHipReportInfo::from_session(const GpSessionCookie& cookie,
                                              std::string_view client_ip,
                                              std::string_view client_ipv6, std::time_t now) {
    GpHipReportInfo info;
    info.md5 = hip_report_md5(cookie);
    info.user_name = cookie.user;
    info.domain = cookie.domain;
    info.host_name = cookie.computer;
    info.ip_address = std::string(client_ip);
    info.ipv6_address = std::string(client_ipv6);
    info.generate_time = now;
    GpHipNetworkInterface tun;
    tun.name = tun.description = "tun0";
    if (!client_ip.empty()) tun.ipv4.emplace_back(client_ip);
    if (!client_ipv6.empty()) tun.ipv6.emplace_back(client_ipv6);
    info.interfaces.push_back(std::move(tun));
    return info;
}

std::string hip_time(std::time_t t) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%02d/%02d/%04d %02d:%02d:%02d", tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return buf;
}

std::string build_hip_report(const GpHipReportInfo& info) {
    XmlWriter w;
    w.open("hip-report", "name", "hip-report");
    w.leaf("md5-sum", info.md5);
    w.leaf("user-name", info.user_name);
    w.leaf("domain", info.domain);
    w.leaf("host-name", info.host_name);
    w.leaf("host-id", info.host_id);
    w.leaf("ip-address", info.ip_address);
    w.leaf("ipv6-address", info.ipv6_address);
    w.leaf("generate-time", hip_time(info.generate_time));
    w.leaf("hip-report-version", "4");
    w.open("categories");
    w.open("entry", "name", "host-info");
    w.leaf("client-version", info.client_version);
    w.leaf("os", info.os);
    w.leaf("os-vendor", info.os_vendor);
    w.leaf("domain", info.domain);
    w.leaf("host-name", info.host_name);
    w.leaf("host-id", info.host_id);
    w.open("network-interface");
    for (const auto& nic : info.interfaces) {
        w.open("entry", "name", nic.name);
        w.leaf("description", nic.description);
        w.leaf("mac-address", nic.mac_address);
        w.open("ip-address");
        for (const auto& a : nic.ipv4) w.empty_entry(a);
        w.close();
        w.open("ipv6-address");
        for (const auto& a : nic.ipv6) w.empty_entry(a);
        w.close();
        w.close();
    }
    w.close();  // network-interface
    w.close();  // entry host-info
    for (std::string_view cat : {"antivirus", "anti-spyware", "anti-malware", "disk-backup",
                                 "disk-encryption", "firewall", "patch-management",
                                 "data-loss-prevention"}) {
        w.open("entry", "name", cat);
        w.open("list");
        w.close();
        w.close();
    }
    w.close();  // categories
    w.close();  // hip-report
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + w.finish();
}

}  // namespace espvpn::gp
