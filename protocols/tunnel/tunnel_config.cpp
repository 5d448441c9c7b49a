#include "protocols/tunnel/tunnel_config.h"

#include <arpa/inet.h>

#include <cstring>

namespace espvpn {

Result<std::string> normalise_ip(std::string_view text, bool* is_v6) {
    std::string s(text);
    unsigned char buf[16];
    char out[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET, s.c_str(), buf) == 1) {
        if (is_v6) *is_v6 = false;
        inet_ntop(AF_INET, buf, out, sizeof out);
        return std::string(out);
    }
    if (inet_pton(AF_INET6, s.c_str(), buf) == 1) {
        if (is_v6) *is_v6 = true;
        inet_ntop(AF_INET6, buf, out, sizeof out);
        return std::string(out);
    }
    return make_error("not a numeric IP address: '" + s + "'");
}

Result<int> netmask_length(std::string_view dotted) {
    std::string s(dotted);
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return make_error("not a dotted netmask: '" + s + "'");
    std::uint32_t m = ntohl(a.s_addr);
    int len = 0;
    while (len < 32 && (m & (0x80000000u >> len))) ++len;
    std::uint32_t expect = len == 0 ? 0 : ~0u << (32 - len);
    if (m != expect) return make_error("netmask is not contiguous: '" + s + "'");
    return len;
}

Result<IpAddressLength> parse_address_length(std::string_view text) {
    IpAddressLength p;
    std::size_t slash = text.find('/');
    std::string addr(text.substr(0, slash));
    if (inet_pton(AF_INET, addr.c_str(), p.bytes) == 1) {
        p.v6 = false;
        p.length = 32;
    } else if (inet_pton(AF_INET6, addr.c_str(), p.bytes) == 1) {
        p.v6 = true;
        p.length = 128;
    } else {
        return make_error("'" + std::string(text) + "': not an IP address");
    }
    if (slash != std::string_view::npos) {
        std::string_view len_text = text.substr(slash + 1);
        if (!p.v6 && len_text.find('.') != std::string_view::npos) {
            auto l = netmask_length(len_text);
            if (!l) return make_error("'" + std::string(text) + "': " + l.error().message);
            p.length = *l;
        } else {
            int max = p.v6 ? 128 : 32, v = 0;
            if (len_text.empty() || len_text.size() > 3)
                return make_error("'" + std::string(text) + "': bad prefix length");
            for (char c : len_text) {
                if (c < '0' || c > '9')
                    return make_error("'" + std::string(text) + "': bad prefix length");
                v = v * 10 + (c - '0');
            }
            if (v > max) return make_error("'" + std::string(text) + "': prefix length over " + std::to_string(max));
            p.length = v;
        }
    }
    return p;
}

Result<IpPrefix> IpPrefix::parse(std::string_view text) {
    auto a = parse_address_length(text);
    if (!a) return make_error("route " + a.error().message);
    IpPrefix p;
    p.v6 = a->v6;
    p.length = a->length;
    std::memcpy(p.bytes, a->bytes, sizeof p.bytes);
    int bytes = p.v6 ? 16 : 4;
    for (int i = 0; i < bytes; ++i) {
        int keep = p.length - 8 * i;
        if (keep >= 8) continue;
        p.bytes[i] &= keep <= 0 ? 0 : static_cast<std::uint8_t>(0xff << (8 - keep));
    }
    return p;
}

std::string IpPrefix::address() const {
    char out[INET6_ADDRSTRLEN];
    inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, out, sizeof out);
    return out;
}

std::string IpPrefix::netmask() const {
    std::uint32_t m = length == 0 ? 0 : ~0u << (32 - length);
    in_addr a{htonl(m)};
    char out[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, out, sizeof out);
    return out;
}

std::string IpPrefix::to_string() const { return address() + "/" + std::to_string(length); }

Result<SplitDomain> SplitDomain::parse(std::string_view text) {
    auto bad = [&](const char* why) {
        return make_error("split-tunnel domain \"" + std::string(text.substr(0, 64)) + "\": " + why);
    };
    SplitDomain d;
    std::string_view rest = text;
    if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
        std::string_view port = rest.substr(colon + 1);
        int p = 0;
        for (char c : port) {
            if (c < '0' || c > '9' || p > 65535) return bad("the port is not a number 1..65535");
            p = p * 10 + (c - '0');
        }
        if (port.empty() || p < 1 || p > 65535) return bad("the port is not a number 1..65535");
        d.port = p;
        rest = rest.substr(0, colon);
    }
    if (rest == "*") {
        d.wildcard = true;
        return d;
    }
    if (rest.substr(0, 2) == "*.") {
        d.wildcard = true;
        rest.remove_prefix(2);
    }
    if (!rest.empty() && rest.back() == '.') rest.remove_suffix(1);  // absolute form
    if (rest.empty() || rest.size() > 253) return bad("not a domain name");
    std::size_t label = 0;
    for (char c : rest) {
        if (c == '.') {
            if (label == 0) return bad("an empty label");
            label = 0;
            d.name += '.';
            continue;
        }
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
        if (!ok) return bad("not a domain name");
        if (++label > 63) return bad("a label longer than 63");
        d.name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (label == 0) return bad("an empty label");
    return d;
}

std::string SplitDomain::to_string() const {
    std::string out = wildcard ? (name.empty() ? "*" : "*." + name) : name;
    if (port) out += ":" + std::to_string(port);
    return out;
}

}  // namespace espvpn
