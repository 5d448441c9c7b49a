#include "protocols/proxy/proxy.h"

#include <arpa/inet.h>
#include <nettle/base64.h>

#include <algorithm>
#include <charconv>

#include "protocols/base/ascii.h"
#include "protocols/http/form.h"
#include "protocols/http/response_parser.h"
#include "protocols/http/secret_buffer.h"

namespace espvpn::proxy {

namespace {

constexpr std::size_t kMaxReplyHeader = 16 * 1024;

// The items of a `separators`-separated list, lower-cased, blanks trimmed, empty ones dropped.
std::vector<std::string> list_items(std::string_view list, std::string_view separators) {
    std::vector<std::string> items;
    std::size_t pos = 0;
    while (pos <= list.size()) {
        auto end = std::min(list.find_first_of(separators, pos), list.size());
        std::string item = ascii_lower(list.substr(pos, end - pos));
        pos = end + 1;
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        if (!item.empty()) items.push_back(std::move(item));
    }
    return items;
}

bool is_ip_literal(const std::string& host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string host_port(std::string_view host, std::uint16_t port) {
    std::string h(host);
    if (h.find(':') != std::string::npos) h = "[" + h + "]";
    return h + ":" + std::to_string(port);
}

Result<std::uint16_t> parse_port(std::string_view text, std::string_view whole) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v > 65535)
        return make_error("proxy '" + std::string(whole) + "': '" + std::string(text) + "' is not a port number");
    return static_cast<std::uint16_t>(v);
}

}  // namespace

std::string ProxySpec::display() const {
    return std::string(kind == ProxyKind::http ? "http" : "socks5") + "://" + host_port(host, port) + "/";
}

Result<ProxySpec> parse_proxy_url(std::string_view text) {
    // The text may hold a password: errors name only the parts that are not secret.
    ProxySpec spec;
    std::string_view rest = text;
    auto scheme_end = rest.find("://");
    std::string scheme = "http";
    if (scheme_end != std::string_view::npos) {
        scheme = ascii_lower(rest.substr(0, scheme_end));
        rest.remove_prefix(scheme_end + 3);
    }
    if (scheme == "http") {
        spec.kind = ProxyKind::http;
        spec.port = 80;
    } else if (scheme == "socks5" || scheme == "socks" || scheme == "socks5h") {
        spec.kind = ProxyKind::socks5;
        spec.port = 1080;
    } else {
        return make_error("proxy scheme '" + scheme + "' is not supported (use http:// or socks5://)");
    }
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        std::string_view userinfo = rest.substr(0, at);
        rest.remove_prefix(at + 1);
        auto colon = userinfo.find(':');
        auto user = http::percent_decode(userinfo.substr(0, colon));
        if (!user) return make_error("the proxy URL's user name is not valid percent-encoding");
        spec.user = *user;
        if (colon != std::string_view::npos) {
            auto pass = http::percent_decode(userinfo.substr(colon + 1));
            if (!pass) return make_error("the proxy URL's password is not valid percent-encoding");
            spec.password = Secret::from_string(*pass);
            std::fill(pass->begin(), pass->end(), '\0');
        }
        if (spec.user.empty()) return make_error("the proxy URL has a password but no user name");
    }
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        if (rest.substr(slash).find_first_not_of('/') != std::string_view::npos)
            return make_error("a proxy URL has no path (got '" + std::string(rest.substr(slash)) + "')");
        rest = rest.substr(0, slash);
    }
    std::string_view port_text;
    if (!rest.empty() && rest.front() == '[') {
        auto close = rest.find(']');
        if (close == std::string_view::npos) return make_error("proxy '" + std::string(rest) + "': missing ']'");
        spec.host = std::string(rest.substr(1, close - 1));
        auto after = rest.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return make_error("proxy '" + std::string(rest) + "': junk after ']'");
            port_text = after.substr(1);
        }
    } else {
        auto colon = rest.rfind(':');
        spec.host = std::string(rest.substr(0, colon));
        if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
    }
    if (spec.host.empty()) return make_error("the proxy URL names no host");
    if (spec.host.find_first_of(" \t\r\n/?#@") != std::string::npos)
        return make_error("proxy host '" + spec.host + "' is not a host name");
    if (!port_text.empty()) {
        auto port = parse_port(port_text, rest);
        if (!port) return port.error();
        spec.port = *port;
    }
    spec.host = ascii_lower(spec.host);
    return spec;
}

bool bypasses_proxy(std::string_view host_in, std::string_view no_proxy) {
    const std::string host = ascii_lower(host_in);
    for (std::string entry : list_items(no_proxy, ", \t")) {
        if (entry == "*") return true;
        if (entry.front() == '[') {  // [v6]:port or [v6]
            entry = entry.substr(1, entry.find(']') - 1);
        } else if (std::count(entry.begin(), entry.end(), ':') == 1) {
            entry = entry.substr(0, entry.find(':'));  // name:port
        }
        if (!entry.empty() && entry.front() == '.') entry.erase(0, 1);
        if (entry.empty()) continue;
        if (host == entry) return true;
        if (!is_ip_literal(host) && host.size() > entry.size() &&
            host.compare(host.size() - entry.size(), entry.size(), entry) == 0 &&
            host[host.size() - entry.size() - 1] == '.')
            return true;
    }
    return false;
}

Result<ProxyAuthMethods> parse_proxy_auth(std::string_view text) {
    ProxyAuthMethods m;
    m.basic = false;
    m.ntlm = false;
    for (const std::string& name : list_items(text, ",")) {
        if (name == "basic") m.basic = true;
        else if (name == "ntlm") m.ntlm = true;
        else if (name == "digest" || name == "gssapi" || name == "negotiate")
            m.unsupported.push_back(name);
        else
            return make_error("--proxy-auth: unknown method '" + name + "' (Basic, Digest, NTLM, GSSAPI)");
    }
    return m;
}

Secret basic_credentials(const ProxySpec& spec) {
    http::SecretBuffer plain;
    plain.append(spec.user);
    plain.append(":");
    plain.append(spec.password);
    Secret encoded(BASE64_ENCODE_RAW_LENGTH(plain.size()));
    nettle_base64_encode_raw(reinterpret_cast<char*>(encoded.reveal_mutable().data()), plain.size(),
                             plain.bytes().data());
    http::SecretBuffer out;
    out.append("Basic ");
    out.append(encoded);
    return out.take_secret();
}

Secret build_connect_request(std::string_view host, std::uint16_t port, const Secret* authorization) {
    const std::string target = host_port(host, port);
    http::SecretBuffer out;
    out.append("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n");
    if (authorization) {
        out.append("Proxy-Authorization: ");
        out.append(*authorization);
        out.append("\r\n");
    }
    out.append("User-Agent: espvpn\r\nProxy-Connection: keep-alive\r\n\r\n");
    return out.take_secret();
}

Secret build_connect_request(const ProxySpec& spec, std::string_view host, std::uint16_t port, bool basic) {
    if (basic && !spec.user.empty()) {
        Secret auth = basic_credentials(spec);
        return build_connect_request(host, port, &auth);
    }
    return build_connect_request(host, port, nullptr);
}

ConnectReplyReader::ConnectReplyReader() : parser_([] {
    http::ParserLimits limits;
    limits.max_header_bytes = kMaxReplyHeader;
    limits.max_body_bytes = 256 * 1024;  // a refusal's error page
    return limits;
}()) {
    parser_.begin("CONNECT");
}

Result<std::size_t> ConnectReplyReader::feed(std::span<const std::uint8_t> data) {
    auto used = parser_.feed(data);
    if (!used) return make_error("the proxy's reply: " + used.error().message);
    return used;
}

Status ConnectReplyReader::finish_eof() {
    eof_ = true;
    if (auto st = parser_.finish_eof(); !st) return make_error("the proxy's reply: " + st.error().message);
    return {};
}

ConnectReply ConnectReplyReader::reply() const {
    const http::Response& head = parser_.head();
    ConnectReply reply{head.status, head.reason, {}, 0, reusable()};
    for (std::string_view value : head.headers.get_all("Proxy-Authenticate")) reply.authenticate.emplace_back(value);
    return reply;
}

bool ConnectReplyReader::may_reuse() const {
    const http::Response& head = parser_.head();
    return head_complete() && head.keep_alive && !head.headers.list_contains("Proxy-Connection", "close");
}

Result<std::optional<ConnectReply>> parse_connect_reply(std::span<const std::uint8_t> received) {
    http::ParserLimits limits;
    limits.max_header_bytes = kMaxReplyHeader;
    http::ResponseParser parser(limits);
    parser.begin("CONNECT");
    auto used = parser.feed(received);
    if (!used) return make_error("the proxy's reply: " + used.error().message);
    if (!parser.head_complete()) {
        // Say so before a line ends: a server that is not a proxy may never send one.
        const std::string_view text(reinterpret_cast<const char*>(received.data()), received.size());
        if (text.size() >= 5 && text.substr(0, 5) != "HTTP/") return make_error("the proxy did not answer with HTTP");
        return std::optional<ConnectReply>{};
    }
    const http::Response& head = parser.head();
    ConnectReply reply{head.status, head.reason, {}, *used, head.keep_alive};
    for (std::string_view value : head.headers.get_all("Proxy-Authenticate")) reply.authenticate.emplace_back(value);
    return std::optional<ConnectReply>(std::move(reply));
}

std::vector<std::uint8_t> socks5_greeting(bool offer_user_pass) {
    if (offer_user_pass) return {5, 2, kSocksNoAuth, kSocksUserPass};
    return {5, 1, kSocksNoAuth};
}

Result<std::uint8_t> parse_socks5_choice(std::span<const std::uint8_t> reply, bool offered_user_pass) {
    if (reply.size() != 2) return make_error("the SOCKS server's method reply is not 2 bytes");
    if (reply[0] != 5) return make_error("the proxy is not a SOCKS5 server (version " + std::to_string(reply[0]) + ")");
    if (reply[1] == kSocksNoAcceptable)
        return make_error(offered_user_pass
                              ? "the SOCKS5 proxy accepts none of the offered authentication methods"
                              : "the SOCKS5 proxy requires authentication: give socks5://USER:PASS@host:port/");
    if (reply[1] == kSocksNoAuth) return kSocksNoAuth;
    if (reply[1] == kSocksUserPass && offered_user_pass) return kSocksUserPass;
    return make_error("the SOCKS5 proxy chose authentication method " + std::to_string(reply[1]) +
                      ", which was not offered");
}

Result<Secret> socks5_user_pass_request(std::string_view user, const Secret& password) {
    if (user.empty() || user.size() > 255) return make_error("a SOCKS5 user name must be 1 to 255 bytes");
    if (password.size() > 255) return make_error("a SOCKS5 password must be at most 255 bytes");
    http::SecretBuffer out;
    const std::uint8_t head[2] = {1, static_cast<std::uint8_t>(user.size())};
    out.append(head);
    out.append(user);
    const std::uint8_t len = static_cast<std::uint8_t>(password.size());
    out.append(std::span<const std::uint8_t>(&len, 1));
    out.append(password);
    return out.take_secret();
}

Status parse_socks5_auth_reply(std::span<const std::uint8_t> reply) {
    if (reply.size() != 2 || reply[0] != 1) return make_error("the SOCKS5 proxy's authentication reply is malformed");
    if (reply[1] != 0) return make_error("the SOCKS5 proxy refused the user name and password");
    return {};
}

Result<std::vector<std::uint8_t>> socks5_connect_request(std::string_view host, std::uint16_t port) {
    std::vector<std::uint8_t> out = {5, 1, 0};
    const std::string h(host);
    unsigned char addr[16];
    if (inet_pton(AF_INET, h.c_str(), addr) == 1) {
        out.push_back(1);
        out.insert(out.end(), addr, addr + 4);
    } else if (inet_pton(AF_INET6, h.c_str(), addr) == 1) {
        out.push_back(4);
        out.insert(out.end(), addr, addr + 16);
    } else {
        if (h.empty() || h.size() > 255) return make_error("host name '" + h + "' cannot go in a SOCKS5 request");
        out.push_back(3);
        out.push_back(static_cast<std::uint8_t>(h.size()));
        out.insert(out.end(), h.begin(), h.end());
    }
    out.push_back(static_cast<std::uint8_t>(port >> 8));
    out.push_back(static_cast<std::uint8_t>(port & 0xff));
    return out;
}

Result<Socks5Reply> parse_socks5_connect_reply(std::span<const std::uint8_t> r) {
    Socks5Reply out;
    if (r.size() >= 1 && r[0] != 5) return make_error("the SOCKS5 proxy's CONNECT reply has version " + std::to_string(r[0]));
    if (r.size() >= 2 && r[1] != 0) {
        static const char* const kReasons[] = {
            "succeeded", "general SOCKS server failure", "connection not allowed by ruleset",
            "network unreachable", "host unreachable", "connection refused", "TTL expired",
            "command not supported", "address type not supported",
        };
        std::string why = r[1] < std::size(kReasons) ? kReasons[r[1]] : "reply code " + std::to_string(r[1]);
        return make_error("the SOCKS5 proxy could not connect: " + why);
    }
    if (r.size() < 5) return out;
    std::size_t addr_len = 0;
    switch (r[3]) {
        case 1: addr_len = 4; break;
        case 4: addr_len = 16; break;
        case 3: addr_len = 1u + r[4]; break;
        default: return make_error("the SOCKS5 proxy's CONNECT reply has address type " + std::to_string(r[3]));
    }
    out.needed = 4 + addr_len + 2;
    if (r.size() > out.needed) return make_error("the SOCKS5 proxy sent data before the tunnel was set up");
    out.complete = r.size() == out.needed;
    return out;
}

}  // namespace espvpn::proxy
