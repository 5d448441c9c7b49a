// esp-peer: puts the project's ESP engine (protocols/esp) against a peer that does
// ESP in the kernel (Linux xfrm, or a gateway) over ESP-in-UDP, and prints one line
// per check, then the counters behind them:
//   CHECK <name> PASS|FAIL|EDGE <detail>
//   COUNTER <name>=<value> ...
// EDGE: both ends behave within the RFC but differently (documented in
// docs/RELIABILITY.md); it never fails the run. Exit status 0 when no check failed,
// 1 when one did, 2 on bad arguments. tools/interop runs it and judges the kernel's
// side of each check from the kernel's own counters.
//
//   esp-peer --suite aes-128-cbc+sha1 --local 192.0.2.1:4501 --remote 192.0.2.2:4501
//            --inner-src 10.77.0.1 --inner-dst 10.77.0.2
//            --c2s-spi 0x1001 --c2s-ekey HEX [--c2s-akey HEX]
//            --s2c-spi 0x2001 --s2c-ekey HEX [--s2c-akey HEX]
//            [--timeout-ms 3000] [--mtu 1500] [--checks LIST]
//            [--kernel-stat-pid PID]        a process in the kernel peer's netns: its
//                                           /proc/PID/net/xfrm_stat deltas are printed
//            [--rekey-cmd CMD --rekey-c2s-spi S --rekey-s2c-spi S --rekey-c2s-ekey HEX
//             [--rekey-c2s-akey HEX] --rekey-s2c-ekey HEX [--rekey-s2c-akey HEX]]
//            [--tfc-pad N]                  the peer's s2c SA pads to N bytes (TFC)
//            [--next --suite ... (another case)]...
//
// Addresses: IPv4 or IPv6 ([addr]:port), outer and inner independently. LIST (comma
// separated, default all): probe, echo, kernel-tamper, kernel-replay, kernel-seq0,
// nh59, we-replay, we-tamper, we-seq0, pad-bytes, rekey (needs --rekey-*), tfc.
//
// We are the client: we seal c2s (the peer opens it), the peer seals s2c (we open it).
// The peer owns --inner-dst and answers our ICMP echo requests with echo replies that
// must carry our payload byte for byte. "The peer did not answer" is judged without
// waiting for a timeout: after the packet it must drop, a good one follows, and the
// first reply must be the good one's. A single-threaded test tool: every wait is
// bounded by --timeout-ms.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/esp_transform.h"
#include "protocols/esp/esp_sa.h"
#include "protocols/esp/gp_probe.h"

namespace {

using namespace espvpn;
using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kBufferSize = 9000;
constexpr std::uint16_t kEchoId = 0x4b56;
constexpr int kLostTimeoutMs = 300;
constexpr std::uint8_t kNextHeaderNone = 59;  // RFC 4303 2.6: a dummy packet

struct Address {
    int family = AF_INET;
    std::array<std::uint8_t, 16> bytes{};
    std::size_t size() const { return family == AF_INET ? 4 : 16; }
    std::span<const std::uint8_t> span() const { return {bytes.data(), size()}; }
};

struct Endpoint {
    Address addr;
    std::uint16_t port = 0;
    sockaddr_storage storage() const {
        sockaddr_storage ss{};
        if (addr.family == AF_INET) {
            auto* s = reinterpret_cast<sockaddr_in*>(&ss);
            s->sin_family = AF_INET;
            s->sin_port = htons(port);
            std::memcpy(&s->sin_addr, addr.bytes.data(), 4);
        } else {
            auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
            s->sin6_family = AF_INET6;
            s->sin6_port = htons(port);
            std::memcpy(&s->sin6_addr, addr.bytes.data(), 16);
        }
        return ss;
    }
    socklen_t length() const { return addr.family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6); }
};

struct SaArgs {
    std::uint32_t c2s_spi = 0, s2c_spi = 0;
    std::string c2s_ekey, c2s_akey, s2c_ekey, s2c_akey;
};

struct Options {
    std::string suite;
    Endpoint local, remote;
    Address inner_src, inner_dst;
    SaArgs sa, rekey;
    std::string rekey_cmd;
    int timeout_ms = 3000;
    std::size_t mtu = 1500;
    std::size_t tfc_pad = 0;
    long stat_pid = 0;
    std::set<std::string> checks;
};

const std::set<std::string> kAllChecks = {"probe", "echo", "kernel-tamper", "kernel-replay", "kernel-seq0",
                                          "nh59", "we-replay", "we-tamper", "we-seq0", "pad-bytes",
                                          "rekey", "tfc"};

[[noreturn]] void usage_error(const std::string& what) {
    std::fprintf(stderr, "esp-peer: %s\n(see the comment at the top of tools/esp-peer/esp_peer.cpp)\n",
                 what.c_str());
    std::exit(2);
}

bool parse_address(std::string_view text, Address& out) {
    const std::string s(text);
    if (inet_pton(AF_INET, s.c_str(), out.bytes.data()) == 1) { out.family = AF_INET; return true; }
    if (inet_pton(AF_INET6, s.c_str(), out.bytes.data()) == 1) { out.family = AF_INET6; return true; }
    return false;
}

bool parse_endpoint(std::string_view text, Endpoint& out) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return false;
    std::string_view host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (!parse_address(host, out.addr)) return false;
    const std::string port(text.substr(colon + 1));
    char* end = nullptr;
    const unsigned long p = std::strtoul(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p == 0 || p > 65535) return false;
    out.port = static_cast<std::uint16_t>(p);
    return true;
}

std::uint32_t parse_spi(const std::string& text) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || v == 0 || v > 0xffffffffULL) usage_error("bad SPI '" + text + "'");
    return static_cast<std::uint32_t>(v);
}

long parse_number(const std::string& text, long lo, long hi, const char* what) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < lo || v > hi)
        usage_error(std::string("--") + what + " wants " + std::to_string(lo) + ".." + std::to_string(hi));
    return v;
}

Options parse_options(const std::vector<std::string>& args) {
    Options o;
    std::map<std::string, std::string> kv;
    for (std::size_t i = 0; i < args.size(); i += 2) {
        const std::string& key = args[i];
        if (key.rfind("--", 0) != 0 || i + 1 >= args.size()) usage_error("expected --option VALUE at '" + key + "'");
        kv[key.substr(2)] = args[i + 1];
    }
    auto take = [&](const char* name, bool required) -> std::string {
        auto it = kv.find(name);
        if (it == kv.end()) {
            if (required) usage_error(std::string("missing --") + name);
            return {};
        }
        std::string v = it->second;
        kv.erase(it);
        return v;
    };
    o.suite = take("suite", true);
    if (!parse_endpoint(take("local", true), o.local)) usage_error("--local wants ADDR:PORT or [ADDR6]:PORT");
    if (!parse_endpoint(take("remote", true), o.remote)) usage_error("--remote wants ADDR:PORT or [ADDR6]:PORT");
    if (o.local.addr.family != o.remote.addr.family) usage_error("--local and --remote are of different families");
    if (!parse_address(take("inner-src", true), o.inner_src)) usage_error("--inner-src wants an IP address");
    if (!parse_address(take("inner-dst", true), o.inner_dst)) usage_error("--inner-dst wants an IP address");
    if (o.inner_src.family != o.inner_dst.family) usage_error("--inner-src and --inner-dst are of different families");
    o.sa.c2s_spi = parse_spi(take("c2s-spi", true));
    o.sa.s2c_spi = parse_spi(take("s2c-spi", true));
    o.sa.c2s_ekey = take("c2s-ekey", true);
    o.sa.c2s_akey = take("c2s-akey", false);
    o.sa.s2c_ekey = take("s2c-ekey", true);
    o.sa.s2c_akey = take("s2c-akey", false);
    if (auto t = take("timeout-ms", false); !t.empty()) o.timeout_ms = static_cast<int>(parse_number(t, 1, 60000, "timeout-ms"));
    if (auto t = take("mtu", false); !t.empty()) o.mtu = static_cast<std::size_t>(parse_number(t, 576, 9000, "mtu"));
    if (auto t = take("tfc-pad", false); !t.empty()) o.tfc_pad = static_cast<std::size_t>(parse_number(t, 0, 9000, "tfc-pad"));
    if (auto t = take("kernel-stat-pid", false); !t.empty()) o.stat_pid = parse_number(t, 1, 1L << 30, "kernel-stat-pid");
    o.rekey_cmd = take("rekey-cmd", false);
    if (!o.rekey_cmd.empty()) {
        o.rekey.c2s_spi = parse_spi(take("rekey-c2s-spi", true));
        o.rekey.s2c_spi = parse_spi(take("rekey-s2c-spi", true));
        o.rekey.c2s_ekey = take("rekey-c2s-ekey", true);
        o.rekey.c2s_akey = take("rekey-c2s-akey", false);
        o.rekey.s2c_ekey = take("rekey-s2c-ekey", true);
        o.rekey.s2c_akey = take("rekey-s2c-akey", false);
    }
    const std::string checks = take("checks", false);
    if (checks.empty() || checks == "all") {
        o.checks = kAllChecks;
    } else {
        std::stringstream ss(checks);
        for (std::string c; std::getline(ss, c, ',');) {
            if (!kAllChecks.count(c)) usage_error("unknown check '" + c + "'");
            o.checks.insert(c);
        }
    }
    if (o.rekey_cmd.empty()) o.checks.erase("rekey");
    if (!o.tfc_pad) o.checks.erase("tfc");
    if (!kv.empty()) usage_error("unknown option --" + kv.begin()->first);
    return o;
}

void put16(std::uint8_t* p, std::uint16_t v) { p[0] = static_cast<std::uint8_t>(v >> 8); p[1] = static_cast<std::uint8_t>(v); }
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

std::uint32_t sum16(const std::uint8_t* p, std::size_t n, std::uint32_t sum = 0) {
    for (std::size_t i = 0; i + 1 < n; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n % 2) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
    return sum;
}
std::uint16_t fold(std::uint32_t sum) {
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
}

std::size_t ip_header_size(const Address& a) { return a.family == AF_INET ? 20 : 40; }
std::uint8_t next_header_of(const Address& a) { return a.family == AF_INET ? kEspNextHeaderIpv4 : kEspNextHeaderIpv6; }

// An ICMP (IPv4) or ICMPv6 echo request with a recognisable payload of payload_len bytes.
Bytes echo_request(const Options& o, std::uint16_t seq, std::size_t payload_len) {
    const std::size_t hl = ip_header_size(o.inner_src);
    Bytes pkt(hl + 8 + payload_len);
    std::uint8_t* ip = pkt.data();
    std::uint8_t* icmp = ip + hl;
    for (std::size_t i = 0; i < payload_len; ++i) icmp[8 + i] = static_cast<std::uint8_t>(i * 7 + seq);
    put16(icmp + 4, kEchoId);
    put16(icmp + 6, seq);
    if (o.inner_src.family == AF_INET) {
        ip[0] = 0x45;
        put16(ip + 2, static_cast<std::uint16_t>(pkt.size()));
        put16(ip + 4, seq);
        ip[6] = 0x40;  // DF
        ip[8] = 64;
        ip[9] = 1;     // ICMP
        std::memcpy(ip + 12, o.inner_src.bytes.data(), 4);
        std::memcpy(ip + 16, o.inner_dst.bytes.data(), 4);
        put16(ip + 10, fold(sum16(ip, 20)));
        icmp[0] = 8;
        put16(icmp + 2, fold(sum16(icmp, 8 + payload_len)));
    } else {
        ip[0] = 0x60;
        put16(ip + 4, static_cast<std::uint16_t>(8 + payload_len));
        ip[6] = 58;  // ICMPv6
        ip[7] = 64;
        std::memcpy(ip + 8, o.inner_src.bytes.data(), 16);
        std::memcpy(ip + 24, o.inner_dst.bytes.data(), 16);
        icmp[0] = 128;
        std::uint32_t s = sum16(ip + 8, 32);  // pseudo-header: addresses, length, next header
        s += static_cast<std::uint32_t>(8 + payload_len) + 58;
        put16(icmp + 2, fold(sum16(icmp, 8 + payload_len, s)));
    }
    return pkt;
}

// The IP packet's own length (v4 total length / v6 payload length + 40), 0 if unreadable.
std::size_t ip_length(std::span<const std::uint8_t> p) {
    if (p.size() >= 20 && p[0] >> 4 == 4) return get16(p.data() + 2);
    if (p.size() >= 40 && p[0] >> 4 == 6) return 40u + get16(p.data() + 4);
    return 0;
}

// True when inner (cut to its IP length) is the peer's echo reply to request.
bool is_echo_reply_to(std::span<const std::uint8_t> inner, const Bytes& request) {
    if (inner.size() != request.size() || inner.size() < 28) return false;
    const bool v4 = request[0] >> 4 == 4;
    const std::size_t hl = v4 ? 20 : 40;
    if (inner[0] >> 4 != request[0] >> 4) return false;
    const std::size_t alen = v4 ? 4 : 16, src = v4 ? 12 : 8, dst = v4 ? 16 : 24;
    if (std::memcmp(inner.data() + src, request.data() + dst, alen) != 0) return false;
    if (std::memcmp(inner.data() + dst, request.data() + src, alen) != 0) return false;
    if ((v4 ? inner[9] : inner[6]) != (v4 ? 1 : 58)) return false;
    const std::uint8_t* icmp = inner.data() + hl;
    if (icmp[0] != (v4 ? 0 : 129)) return false;
    if (get16(icmp + 4) != get16(request.data() + hl + 4) || get16(icmp + 6) != get16(request.data() + hl + 6)) return false;
    return std::memcmp(icmp + 8, request.data() + hl + 8, request.size() - hl - 8) == 0;
}

std::uint16_t echo_seq_of(std::span<const std::uint8_t> inner) {
    const std::size_t hl = !inner.empty() && inner[0] >> 4 == 6 ? 40 : 20;
    return inner.size() >= hl + 8 ? get16(inner.data() + hl + 6) : 0;
}

std::string drop_text(EspDrop d) { auto s = describe(d); return std::string(s.begin(), s.end()); }

std::pair<std::string, std::string> split_suite(const std::string& suite) {
    const auto plus = suite.find('+');
    if (plus == std::string::npos) return {suite, ""};
    return {suite.substr(0, plus), suite.substr(plus + 1)};
}

EspSaKeys make_keys(const std::string& suite, const std::string& ekey, const std::string& akey, const char* what) {
    const auto [enc, auth] = split_suite(suite);
    auto k = EspSaKeys::from_getconfig(enc, auth, ekey, akey);
    if (!k) usage_error(std::string(what) + " keys: " + k.error().message);
    return std::move(*k);
}

// /proc/PID/net/xfrm_stat of a process in the peer's network namespace.
std::map<std::string, long> read_xfrm_stat(long pid) {
    std::map<std::string, long> m;
    if (!pid) return m;
    std::ifstream f("/proc/" + std::to_string(pid) + "/net/xfrm_stat");
    std::string name;
    long v = 0;
    while (f >> name >> v) m[name] = v;
    return m;
}

std::string stat_delta(const std::map<std::string, long>& before, const std::map<std::string, long>& after) {
    std::string out;
    for (const auto& [k, v] : after) {
        const auto it = before.find(k);
        const long d = v - (it == before.end() ? 0 : it->second);
        if (d) out += (out.empty() ? "" : ",") + k + "+" + std::to_string(d);
    }
    return out.empty() ? "none" : out;
}

class Session {
public:
    Session(const Options& o, EspOutboundSa out, EspInboundSas in, EspSaKeys c2s, EspSaKeys s2c)
        : opts_(o), out_(std::move(out)), in_(std::move(in)), c2s_keys_(std::move(c2s)), s2c_keys_(std::move(s2c)) {}
    ~Session() { if (fd_ >= 0) close(fd_); }

    bool open_socket() {
        fd_ = socket(opts_.local.addr.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return false;
        const int one = 1;
        setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        const sockaddr_storage l = opts_.local.storage(), r = opts_.remote.storage();
        if (bind(fd_, reinterpret_cast<const sockaddr*>(&l), opts_.local.length()) != 0) return false;
        return connect(fd_, reinterpret_cast<const sockaddr*>(&r), opts_.remote.length()) == 0;
    }

    // Seals an inner packet with `sa` (default: the current outbound SA).
    std::optional<Bytes> seal(const Bytes& inner, std::uint8_t next_header, EspOutboundSa* sa = nullptr) {
        Bytes buf(kEspMaxHeadroom + inner.size() + kEspMaxTailroom);
        std::memcpy(buf.data() + kEspMaxHeadroom, inner.data(), inner.size());
        const EspSealResult r = (sa ? *sa : out_).seal(buf, kEspMaxHeadroom, inner.size(), next_header);
        if (!r.ok()) {
            std::printf("  seal failed: %.*s\n", static_cast<int>(describe(r.status).size()), describe(r.status).data());
            return std::nullopt;
        }
        return Bytes(r.packet.begin(), r.packet.end());
    }
    std::optional<Bytes> seal(const Bytes& inner) { return seal(inner, next_header_of(opts_.inner_src)); }

    // Builds and seals an ESP packet by hand with `keys` and sequence number `seq`,
    // with the given pad bytes (not the RFC 4303 default 1, 2, 3, ...).
    std::optional<Bytes> seal_with_padding(const EspSaKeys& keys, std::uint32_t spi, std::uint32_t seq,
                                           const Bytes& inner, std::uint8_t pad_fill) {
        auto sealer = EspSealer::create(keys);
        if (!sealer) return std::nullopt;
        const EspSuite& su = keys.suite();
        const std::size_t pad = su.pad_size(inner.size()) + su.block_size();  // one block more than needed
        Bytes pkt(su.header_size() + inner.size() + pad + kEspTrailerSize + su.icv_size());
        const std::uint32_t be_spi = htonl(spi), be_seq = htonl(seq);
        std::memcpy(pkt.data(), &be_spi, 4);
        std::memcpy(pkt.data() + 4, &be_seq, 4);
        std::uint8_t* text = pkt.data() + su.header_size();
        std::memcpy(text, inner.data(), inner.size());
        std::memset(text + inner.size(), pad_fill, pad);
        text[inner.size() + pad] = static_cast<std::uint8_t>(pad);
        text[inner.size() + pad + 1] = next_header_of(opts_.inner_src);
        if (!sealer->seal(pkt, seq)) return std::nullopt;
        return pkt;
    }

    bool send(const Bytes& esp) { return ::send(fd_, esp.data(), esp.size(), 0) == static_cast<ssize_t>(esp.size()); }

    // Once a reply failed to come, the peer is known not to answer this case (wrong key,
    // no route): later waits are short, so a broken case costs seconds, not minutes.
    std::optional<Bytes> receive(int timeout_ms) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, lost_ ? std::min(timeout_ms, kLostTimeoutMs) : timeout_ms) != 1) {
            lost_ = true;
            return std::nullopt;
        }
        Bytes d(kBufferSize);
        const ssize_t n = recv(fd_, d.data(), d.size(), 0);
        if (n <= 0) return std::nullopt;
        d.resize(static_cast<std::size_t>(n));
        return d;
    }

    // Opens the datagram in place, counting the reason; the inner packet is cut to its
    // IP length (TFC padding, RFC 4303 2.7, lies after it) and the cut counted.
    EspReceived open(Bytes& datagram) {
        EspReceived r = in_.open(datagram);
        ++drops_[r.drop];
        if (r.ok()) {
            last_spi_ = r.spi;
            const std::size_t len = ip_length(r.inner);
            if (len && len < r.inner.size()) {
                const auto extra = r.inner.subspan(len);
                bool zero = true;
                for (auto b : extra) zero = zero && b == 0;
                tfc_bytes_ += extra.size();
                tfc_nonzero_ = tfc_nonzero_ || !zero;
                r.inner = r.inner.first(len);
            }
        }
        return r;
    }

    // Receives replies until the one to `request` arrives (each opened and checked);
    // false when none came in time. Replies to other requests are remembered in `others`.
    bool await_reply(const Bytes& request, std::vector<std::uint16_t>* others, std::string& why,
                     Bytes* raw = nullptr) {
        const std::uint16_t want = echo_seq_of(request);
        for (int i = 0; i < 8; ++i) {
            const bool was_lost = lost_;
            auto d = receive(opts_.timeout_ms);
            if (!d) {
                why = was_lost ? "no reply (the peer answered nothing since its first silence)"
                               : "no reply within " + std::to_string(opts_.timeout_ms) + " ms";
                return false;
            }
            if (raw) *raw = *d;
            EspReceived r = open(*d);
            if (!r.ok()) { why = "a reply was rejected by us: " + drop_text(r.drop); return false; }
            if (is_echo_reply_to(r.inner, request)) return true;
            if (echo_seq_of(r.inner) != want && others) others->push_back(echo_seq_of(r.inner));
            else { why = "the reply opened but does not match our request byte for byte"; return false; }
        }
        why = "too many unexpected datagrams";
        return false;
    }

    // Sends `bad` (which the peer must drop), then a good request; passes when the good
    // one is answered and nothing answers the bad one first.
    bool peer_drops(const Bytes& bad, std::uint16_t bad_seq, std::uint16_t& seq, std::string& why) {
        if (!send(bad)) { why = "send failed"; return false; }
        const Bytes good = echo_request(opts_, seq++, 16);
        auto esp = seal(good);
        if (!esp || !send(*esp)) { why = "sentinel not sent"; return false; }
        std::vector<std::uint16_t> others;
        if (!await_reply(good, &others, why)) { why = "the good packet after it: " + why; return false; }
        for (auto s : others)
            if (s == bad_seq) { why = "the peer answered it"; return false; }
        why = "not answered (the good packet after it was)";
        return true;
    }

    const Options& opts() const { return opts_; }
    EspOutboundSa& out() { return out_; }
    EspInboundSas& in() { return in_; }
    const EspSaKeys& c2s_keys() const { return c2s_keys_; }
    const EspSaKeys& s2c_keys() const { return s2c_keys_; }
    void rekeyed(EspOutboundSa out, EspSaKeys c2s, EspSaKeys s2c) {
        out_ = std::move(out); c2s_keys_ = std::move(c2s); s2c_keys_ = std::move(s2c);
    }
    std::size_t count(EspDrop d) const { auto it = drops_.find(d); return it == drops_.end() ? 0 : it->second; }
    std::uint32_t last_spi() const { return last_spi_; }
    std::size_t tfc_bytes() const { return tfc_bytes_; }
    bool tfc_nonzero() const { return tfc_nonzero_; }

private:
    const Options& opts_;
    EspOutboundSa out_;
    EspInboundSas in_;
    EspSaKeys c2s_keys_, s2c_keys_;
    int fd_ = -1;
    std::map<EspDrop, std::size_t> drops_;
    std::uint32_t last_spi_ = 0;
    std::size_t tfc_bytes_ = 0;
    bool tfc_nonzero_ = false;
    bool lost_ = false;
};

int g_failures = 0;

void report(const char* name, const char* verdict, const std::string& detail) {
    std::printf("CHECK %-15s %s %s\n", name, verdict, detail.c_str());
    std::fflush(stdout);
    if (std::strcmp(verdict, "FAIL") == 0) ++g_failures;
}
void report(const char* name, bool pass, const std::string& detail) { report(name, pass ? "PASS" : "FAIL", detail); }

// The largest ICMP payload whose ESP-in-UDP datagram still fits the outer MTU.
std::size_t max_payload(const Options& o, const EspSuite& su) {
    const std::size_t outer = ip_header_size(o.local.addr) + 8, inner_hdr = ip_header_size(o.inner_src) + 8;
    std::size_t best = 0;
    for (std::size_t p = 0; p < o.mtu; ++p)
        if (outer + su.packet_size(inner_hdr + p) <= o.mtu) best = p;
    return best;
}

void run_checks(Session& s) {
    const Options& o = s.opts();
    auto want = [&](const char* c) { return o.checks.count(c) != 0; };
    std::uint16_t seq = 1;
    std::optional<Bytes> kept_reply;   // opened: for the replay check
    std::optional<Bytes> unopened;     // never opened: after a rekey, the old inbound SA must still take it

    if (want("probe")) {
        std::array<std::uint8_t, kGpProbeMaxSize> probe{};
        GpProbe p = build_gp_probe(probe, o.inner_src.span(), o.inner_dst.span(), seq++);
        bool ok = false;
        std::string why = "probe could not be built";
        if (p.size) {
            auto esp = s.seal(Bytes(probe.begin(), probe.begin() + static_cast<long>(p.size)), p.next_header);
            why = "send failed";
            if (esp && s.send(*esp)) {
                auto reply = s.receive(o.timeout_ms);
                if (!reply) why = "no reply";
                else {
                    EspReceived r = s.open(*reply);
                    ok = r.ok() && is_gp_probe_reply(r.inner, o.inner_dst.span());
                    why = r.ok() ? (ok ? "the peer answered the magic ping" : "reply is not a probe reply")
                                 : "reply rejected: " + drop_text(r.drop);
                }
            }
        }
        report("probe", ok, why);
    }

    if (want("echo")) {
        const std::size_t top = max_payload(o, s.out().suite());
        std::vector<std::size_t> sizes = {0, 1, 2, 13, 14, 15, 16, 17, 31, 32, 64, 255, 1000};
        std::erase_if(sizes, [&](std::size_t n) { return n + 1 >= top; });
        sizes.push_back(top - 1);
        sizes.push_back(top);
        int ok = 0;
        const int total = static_cast<int>(sizes.size());
        std::string first_failure;
        for (std::size_t n : sizes) {
            std::string why;
            const Bytes req = echo_request(o, seq++, n);
            auto esp = s.seal(req);
            Bytes raw;
            if (!esp || !s.send(*esp)) why = "not sent";
            else if (s.await_reply(req, nullptr, why, &raw)) { ++ok; kept_reply = raw; continue; }
            first_failure = "; stopped at payload " + std::to_string(n) + ": " + why;
            break;
        }
        const std::size_t outer = ip_header_size(o.local.addr) + 8 +
                                  s.out().suite().packet_size(ip_header_size(o.inner_src) + 8 + top);
        report("echo", ok == total,
               std::to_string(ok) + "/" + std::to_string(total) + " byte-exact echoes, ICMP payload 0.." +
                   std::to_string(top) + " B (outer datagram " + std::to_string(outer) + " B = MTU " +
                   std::to_string(o.mtu) + ")" + first_failure);
        std::printf("COUNTER echo_sent=%d echo_ok=%d max_payload=%zu\n", total, ok, top);
        // One more reply kept unopened for the rekey check.
        if (want("rekey")) {
            const Bytes req = echo_request(o, seq++, 40);
            if (auto esp = s.seal(req); esp && s.send(*esp)) unopened = s.receive(o.timeout_ms);
        }
    }

    if (want("kernel-tamper")) {
        const std::uint16_t bad_seq = seq++;
        auto esp = s.seal(echo_request(o, bad_seq, 32));
        std::string why = "seal failed";
        bool pass = false;
        if (esp) {
            (*esp)[esp->size() / 2] ^= 0x01;
            pass = s.peer_drops(*esp, bad_seq, seq, why);
        }
        report("kernel-tamper", pass, "one bit flipped in our ciphertext: " + why);
    }

    if (want("kernel-replay")) {
        const Bytes req = echo_request(o, seq++, 48);
        auto esp = s.seal(req);
        std::string why = "seal failed";
        bool pass = false;
        if (esp && s.send(*esp)) {
            if (!s.await_reply(req, nullptr, why)) why = "the original: " + why;
            else if ((pass = s.peer_drops(*esp, echo_seq_of(req), seq, why))) why = "original answered, copy " + why;
            else why = "original answered, copy: " + why;
        }
        report("kernel-replay", pass, "our packet sent twice: " + why);
    }

    if (want("kernel-seq0")) {
        auto zero = EspOutboundSa::create(s.out().spi(), s.c2s_keys(), 0);
        std::string why = "cannot create a sequence-0 SA";
        bool pass = false;
        const auto before = read_xfrm_stat(o.stat_pid);
        if (zero) {
            const std::uint16_t bad_seq = seq++;
            auto esp = s.seal(echo_request(o, bad_seq, 24), next_header_of(o.inner_src), &*zero);
            pass = esp && s.peer_drops(*esp, bad_seq, seq, why);
        }
        std::printf("COUNTER kernel_seq0_stat=%s\n", o.stat_pid ? stat_delta(before, read_xfrm_stat(o.stat_pid)).c_str() : "n/a");
        report("kernel-seq0", pass, "ESP sequence number 0: " + why);
    }

    bool nh59_peer = false;
    std::string nh59_why = "seal failed";
    if (want("nh59")) {
        const auto before = read_xfrm_stat(o.stat_pid);
        const std::uint16_t bad_seq = seq++;
        auto esp = s.seal(echo_request(o, bad_seq, 20), kNextHeaderNone);
        nh59_peer = esp && s.peer_drops(*esp, bad_seq, seq, nh59_why);
        std::printf("COUNTER kernel_nh59_stat=%s\n", o.stat_pid ? stat_delta(before, read_xfrm_stat(o.stat_pid)).c_str() : "n/a");
    }

    if (want("we-replay")) {
        bool pass = false;
        std::string detail = "no peer datagram kept";
        if (kept_reply) {
            Bytes a = *kept_reply, b = *kept_reply;
            EspReceived r1 = s.open(a), r2 = s.open(b);
            pass = r1.drop == EspDrop::replayed && r2.drop == EspDrop::replayed;
            detail = "an accepted peer datagram re-fed twice: " + drop_text(r1.drop) + ", " + drop_text(r2.drop);
        }
        report("we-replay", pass, detail);
    }

    if (want("we-tamper")) {
        const Bytes request = echo_request(o, seq++, 100);
        auto esp = s.seal(request);
        bool pass = false;
        std::string detail = "no reply to tamper with";
        if (esp && s.send(*esp)) {
            if (auto reply = s.receive(o.timeout_ms)) {
                Bytes icv_flip = *reply, body_flip = *reply, original = *reply;
                icv_flip.back() ^= 0x80;
                body_flip[body_flip.size() / 2] ^= 0x01;
                EspReceived r1 = s.open(icv_flip), r2 = s.open(body_flip), r3 = s.open(original);
                pass = r1.drop == EspDrop::bad_icv && r2.drop == EspDrop::bad_icv && r3.ok() &&
                       is_echo_reply_to(r3.inner, request);
                detail = "peer datagram, ICV bit: " + drop_text(r1.drop) + ", body bit: " + drop_text(r2.drop) +
                         ", then the original: " + (r3.ok() ? std::string("accepted") : drop_text(r3.drop));
            }
        }
        report("we-tamper", pass, detail);
    }

    if (want("we-seq0")) {
        // A sequence-0 packet sealed with the peer's s2c keys (as a peer starting at 0 would).
        auto forger = EspOutboundSa::create(o.sa.s2c_spi, s.s2c_keys(), 0);
        std::string detail = "cannot create the forger";
        if (forger) {
            const Bytes inner = echo_request(o, seq++, 8);
            Bytes buf(kEspMaxHeadroom + inner.size() + kEspMaxTailroom);
            std::memcpy(buf.data() + kEspMaxHeadroom, inner.data(), inner.size());
            const EspSealResult r = forger->seal(buf, kEspMaxHeadroom, inner.size(), next_header_of(o.inner_src));
            if (r.ok()) {
                Bytes d(r.packet.begin(), r.packet.end());
                EspReceived got = s.open(d);
                detail = got.ok() ? "espvpn accepts sequence number 0 (the Linux kernel refuses it)"
                                  : "espvpn refuses sequence number 0: " + drop_text(got.drop);
            }
        }
        report("we-seq0", "EDGE", detail);
    }

    if (want("rekey")) {
        // The peer gets the new pair of SAs while the old pair stays (CMD); we install the
        // new inbound SA (the old one stays as previous) and switch our outbound.
        const int rc = std::system(o.rekey_cmd.c_str());
        auto c2s = make_keys(o.suite, o.rekey.c2s_ekey, o.rekey.c2s_akey, "rekey c2s");
        auto s2c = make_keys(o.suite, o.rekey.s2c_ekey, o.rekey.s2c_akey, "rekey s2c");
        auto out = EspOutboundSa::create(o.rekey.c2s_spi, c2s);
        auto in = EspInboundSa::create(o.rekey.s2c_spi, s2c);
        if (!out || !in) usage_error("rekey SAs could not be created");
        s.in().install(std::move(*in));
        std::string why_old, why_new, old_spi_text = "not kept";
        bool old_in = false;
        if (unopened) {
            EspReceived r = s.open(*unopened);
            old_in = r.ok() && r.spi == o.sa.s2c_spi;
            old_spi_text = r.ok() ? "accepted by the previous inbound SA" : drop_text(r.drop);
        }
        // Old outbound SA still taken by the peer, then the new one.
        const Bytes a = echo_request(o, seq++, 60);
        auto ea = s.seal(a);
        const bool old_out = rc == 0 && ea && s.send(*ea) && s.await_reply(a, nullptr, why_old);
        const std::uint32_t reply_spi_old = s.last_spi();
        s.rekeyed(std::move(*out), std::move(c2s), std::move(s2c));
        const Bytes b = echo_request(o, seq++, 60);
        auto eb = s.seal(b);
        const bool new_out = rc == 0 && eb && s.send(*eb) && s.await_reply(b, nullptr, why_new);
        char detail[400];
        std::snprintf(detail, sizeof detail,
                      "rekey command %s; old c2s SPI 0x%08x %s (reply on 0x%08x); new c2s SPI 0x%08x %s (reply on 0x%08x); "
                      "an old-SA datagram after the switch: %s",
                      rc == 0 ? "ok" : "FAILED", o.sa.c2s_spi, old_out ? "answered" : ("not answered: " + why_old).c_str(),
                      reply_spi_old, o.rekey.c2s_spi, new_out ? "answered" : ("not answered: " + why_new).c_str(),
                      s.last_spi(), old_spi_text.c_str());
        report("rekey", old_out && new_out && old_in, detail);
    }

    if (want("tfc")) {
        // The peer's s2c SA pads every packet to tfc_pad bytes; the echoes above were all
        // opened and cut to their IP length.
        const Bytes req = echo_request(o, seq++, 10);
        auto esp = s.seal(req);
        std::string why;
        const std::size_t before = s.tfc_bytes();
        const bool answered = esp && s.send(*esp) && s.await_reply(req, nullptr, why);
        const std::size_t extra = s.tfc_bytes() - before;
        report("tfc", answered && extra > 0 && !s.tfc_nonzero(),
               "peer pads to " + std::to_string(o.tfc_pad) + " B: a 38-byte echo reply came with " +
                   std::to_string(extra) + " bytes of TFC padding after the inner packet" +
                   (s.tfc_nonzero() ? " (NOT all zero)" : " (zeros)") +
                   "; espvpn's datapath hands the padded packet to the tun, whose IP stack cuts it to the IP length" +
                   (answered ? "" : "; " + why));
    }

    if (want("pad-bytes")) {
        // Padding bytes 0xAA instead of 1, 2, 3, ... and one block more than needed; last,
        // because this packet takes a sequence number our outbound SA does not know of.
        const Bytes req = echo_request(o, seq++, 30);
        const std::uint32_t pseq = static_cast<std::uint32_t>(s.out().next_sequence());
        auto esp = s.seal_with_padding(s.c2s_keys(), s.out().spi(), pseq, req, 0xAA);
        std::string why;
        const bool peer_took = esp && s.send(*esp) && s.await_reply(req, nullptr, why);
        // And the same kind of packet sealed with the s2c keys, opened by us.
        auto forged = s.seal_with_padding(s.s2c_keys(), s.in().current()->spi(), 0x7ffffff0u, req, 0xAA);
        std::string ours = "not built";
        if (forged) { EspReceived r = s.open(*forged); ours = r.ok() ? "accepted" : drop_text(r.drop); }
        report("pad-bytes", "EDGE",
               std::string("pad bytes 0xAA (RFC 4303 default is 1, 2, 3, ...): the peer ") +
                   (peer_took ? "accepts them" : "drops them (" + why + ")") + "; espvpn: " + ours);
    }

    if (want("nh59")) {
        // Last (it moves our replay window far ahead): a dummy packet sealed with the s2c keys.
        auto forger = EspOutboundSa::create(s.in().current()->spi(), s.s2c_keys(), 0x7ffffff8u);
        std::string ours = "not built";
        if (forger) {
            const Bytes inner = echo_request(o, seq++, 20);
            if (auto d = s.seal(inner, kNextHeaderNone, &*forger)) {
                EspReceived r = s.open(*d);
                ours = r.ok() ? "delivered (next header " + std::to_string(r.next_header) + ")" : "dropped: " + drop_text(r.drop);
            }
        }
        report("nh59", nh59_peer, "dummy packet (next header 59): the peer " +
                                      (nh59_peer ? std::string("discards it") : "did not discard it: " + nh59_why) +
                                      "; espvpn " + ours);
    }

    std::printf("COUNTER our_accepted=%zu our_replayed=%zu our_bad_icv=%zu our_bad_padding=%zu "
                "our_bad_next_header=%zu next_c2s_seq=%llu tfc_bytes=%zu\n",
                s.count(EspDrop::none), s.count(EspDrop::replayed), s.count(EspDrop::bad_icv),
                s.count(EspDrop::bad_padding), s.count(EspDrop::bad_next_header),
                static_cast<unsigned long long>(s.out().next_sequence()), s.tfc_bytes());
}

}  // namespace

namespace {

// One case: its SAs, a socket, every selected check.
void run_case(const Options& o) {
    const auto started = std::chrono::steady_clock::now();
    auto c2s_keys = make_keys(o.suite, o.sa.c2s_ekey, o.sa.c2s_akey, "c2s");
    auto s2c_keys = make_keys(o.suite, o.sa.s2c_ekey, o.sa.s2c_akey, "s2c");
    auto out = EspOutboundSa::create(o.sa.c2s_spi, c2s_keys);
    if (!out) usage_error("outbound SA: " + out.error().message);
    auto in_sa = EspInboundSa::create(o.sa.s2c_spi, s2c_keys);
    if (!in_sa) usage_error("inbound SA: " + in_sa.error().message);
    EspInboundSas in;
    in.install(std::move(*in_sa));

    Session session(o, std::move(*out), std::move(in), std::move(c2s_keys), std::move(s2c_keys));
    if (!session.open_socket()) {
        report("socket", false, std::string("cannot bind/connect the UDP socket: ") + std::strerror(errno));
        return;
    }
    run_checks(session);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    std::printf("COUNTER case_ms=%lld\n", static_cast<long long>(ms.count()));
}

}  // namespace

// Cases are separated by --next: one process for all of them (every exec is slow in an
// emulated guest); each starts with a "CASE <n>" line.
int main(int argc, char** argv) {
    std::vector<std::vector<std::string>> cases(1);
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--next") cases.emplace_back();
        else cases.back().emplace_back(argv[i]);
    }
    std::vector<Options> parsed;
    for (const auto& c : cases) parsed.push_back(parse_options(c));  // all bad arguments first
    for (std::size_t i = 0; i < parsed.size(); ++i) {
        if (parsed.size() > 1) std::printf("CASE %zu\n", i);
        run_case(parsed[i]);
    }
    return g_failures == 0 ? 0 : 1;
}
