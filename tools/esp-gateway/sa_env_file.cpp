#include "tools/esp-gateway/sa_env_file.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace espvpn::tools {

namespace {
Result<std::uint64_t> number(const std::map<std::string, std::string, std::less<>>& kv, std::string_view name,
                             int base = 10) {
    auto it = kv.find(name);
    if (it == kv.end()) return make_error("SA file: " + std::string(name) + " is missing");
    std::string_view v = it->second;
    if (base == 16 && v.substr(0, 2) == "0x") v.remove_prefix(2);
    std::uint64_t out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
    if (ec != std::errc{} || p != v.data() + v.size() || v.empty())
        return make_error("SA file: " + std::string(name) + "='" + it->second + "' is not a number");
    return out;
}
}  // namespace

Result<SaFile> SaFile::parse(std::string_view text) {
    std::map<std::string, std::string, std::less<>> kv;
    std::size_t line_no = 0;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        const std::size_t eq = line.find('=');
        if (eq == std::string_view::npos || eq == 0)
            return make_error("SA file line " + std::to_string(line_no) + ": expected NAME=VALUE");
        kv.emplace(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    }
    SaFile sa;
    auto text_of = [&](std::string_view name) -> std::string {
        auto it = kv.find(name);
        return it == kv.end() ? std::string() : it->second;
    };
    auto gen = number(kv, "GENERATION");
    if (!gen) return gen.error();
    sa.generation = *gen;
    sa.enc = text_of("ENC");
    sa.auth = text_of("AUTH");
    if (sa.enc.empty()) return make_error("SA file: ENC is missing");
    if (auto port = number(kv, "UDP_PORT"); port && *port > 0 && *port < 65536) sa.udp_port = static_cast<unsigned>(*port);
    sa.gw_address = text_of("GW_ADDRESS");
    sa.client_ip = text_of("CLIENT_IP");
    sa.client_ip6 = text_of("CLIENT_IP6");
    for (auto [prefix, dir] : {std::pair<const char*, SaFileDirection*>{"C2S_", &sa.c2s}, {"S2C_", &sa.s2c}}) {
        auto spi = number(kv, std::string(prefix) + "SPI", 16);
        if (!spi) return spi.error();
        if (*spi > 0xffffffffu) return make_error(std::string("SA file: ") + prefix + "SPI does not fit 32 bits");
        dir->spi = static_cast<std::uint32_t>(*spi);
        dir->ekey_hex = Secret::from_string(text_of(std::string(prefix) + "EKEY"));
        dir->akey_hex = Secret::from_string(text_of(std::string(prefix) + "AKEY"));
        // Overwrite the map's copies of the keys before it is freed.
        for (const char* k : {"EKEY", "AKEY"}) {
            auto it = kv.find(std::string(prefix) + k);
            if (it != kv.end()) std::memset(it->second.data(), 0, it->second.size());
        }
    }
    return sa;
}

Result<SaFile> SaFile::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error("cannot read SA file " + path + ": " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    auto sa = parse(s);
    std::memset(s.data(), 0, s.size());
    if (!sa) return make_error(path + ": " + sa.error().message);
    return sa;
}

Result<EspOutboundSa> SaFile::outbound(const SaFileDirection& d) const {
    auto keys = EspSaKeys::from_getconfig(enc, auth, d.ekey_hex.reveal_text(), d.akey_hex.reveal_text());
    if (!keys) return keys.error();
    return EspOutboundSa::create(d.spi, *keys);
}

Result<EspInboundSa> SaFile::inbound(const SaFileDirection& d) const {
    auto keys = EspSaKeys::from_getconfig(enc, auth, d.ekey_hex.reveal_text(), d.akey_hex.reveal_text());
    if (!keys) return keys.error();
    return EspInboundSa::create(d.spi, *keys);
}

}  // namespace espvpn::tools
