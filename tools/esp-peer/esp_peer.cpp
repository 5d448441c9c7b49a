// esp-peer: puts the project's ESP engine (protocols/esp) against a Linux kernel
// xfrm peer over ESP-in-UDP, and prints one line per check:
//   CHECK <name> PASS|FAIL <detail>
// Exit status 0 when every check passed, 1 when one failed, 2 on bad arguments.
//
//   esp-peer --suite aes-128-cbc+sha1 --local 192.0.2.1:4501 --remote 192.0.2.2:4501
//            --inner-src 10.77.0.1 --inner-dst 10.77.0.2
//            --c2s-spi 0x1001 --c2s-ekey HEX [--c2s-akey HEX]
//            --s2c-spi 0x2001 --s2c-ekey HEX [--s2c-akey HEX] [--timeout-ms 3000]
//
// We are the client: we seal c2s (the kernel opens it), the kernel seals s2c (we open
// it). The kernel side owns --inner-dst, so our sealed ICMP echo requests come back as
// kernel-sealed echo replies. Kernel-side drops (tampered, replayed) show only in its
// xfrm counters; the calling script checks those. A single-threaded test tool: every
// wait is bounded by --timeout-ms.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/esp_transform.h"
#include "protocols/esp/esp_sa.h"
#include "protocols/esp/gp_probe.h"

namespace {

using namespace espvpn;
using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kBufferSize = 2048;
constexpr std::uint8_t kIcmpEchoRequest = 8;
constexpr std::uint8_t kIcmpEchoReply = 0;

struct Options {
    std::string suite;
    sockaddr_in local{};
    sockaddr_in remote{};
    std::array<std::uint8_t, 4> inner_src{};
    std::array<std::uint8_t, 4> inner_dst{};
    std::uint32_t c2s_spi = 0, s2c_spi = 0;
    std::string c2s_ekey, c2s_akey, s2c_ekey, s2c_akey;
    int timeout_ms = 3000;
};

[[noreturn]] void usage_error(const std::string& what) {
    std::fprintf(stderr, "esp-peer: %s\n(see the comment at the top of tools/esp-peer/esp_peer.cpp)\n",
                 what.c_str());
    std::exit(2);
}

bool parse_ipv4(std::string_view text, std::array<std::uint8_t, 4>& out) {
    std::string s(text);
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
    std::memcpy(out.data(), &a, 4);
    return true;
}

bool parse_endpoint(std::string_view text, sockaddr_in& out) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return false;
    std::array<std::uint8_t, 4> addr{};
    if (!parse_ipv4(text.substr(0, colon), addr)) return false;
    const std::string port(text.substr(colon + 1));
    char* end = nullptr;
    const unsigned long p = std::strtoul(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p == 0 || p > 65535) return false;
    out.sin_family = AF_INET;
    out.sin_port = htons(static_cast<std::uint16_t>(p));
    std::memcpy(&out.sin_addr, addr.data(), 4);
    return true;
}

std::uint32_t parse_spi(const std::string& text) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || v == 0 || v > 0xffffffffULL) usage_error("bad SPI '" + text + "'");
    return static_cast<std::uint32_t>(v);
}

Options parse_options(int argc, char** argv) {
    Options o;
    std::map<std::string, std::string> kv;
    for (int i = 1; i < argc; i += 2) {
        const std::string key = argv[i];
        if (key.rfind("--", 0) != 0 || i + 1 >= argc) usage_error("expected --option VALUE at '" + key + "'");
        kv[key.substr(2)] = argv[i + 1];
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
    if (!parse_endpoint(take("local", true), o.local)) usage_error("--local wants IPv4:PORT");
    if (!parse_endpoint(take("remote", true), o.remote)) usage_error("--remote wants IPv4:PORT");
    if (!parse_ipv4(take("inner-src", true), o.inner_src)) usage_error("--inner-src wants an IPv4 address");
    if (!parse_ipv4(take("inner-dst", true), o.inner_dst)) usage_error("--inner-dst wants an IPv4 address");
    o.c2s_spi = parse_spi(take("c2s-spi", true));
    o.s2c_spi = parse_spi(take("s2c-spi", true));
    o.c2s_ekey = take("c2s-ekey", true);
    o.c2s_akey = take("c2s-akey", false);
    o.s2c_ekey = take("s2c-ekey", true);
    o.s2c_akey = take("s2c-akey", false);
    if (auto t = take("timeout-ms", false); !t.empty()) o.timeout_ms = std::atoi(t.c_str());
    if (o.timeout_ms <= 0 || o.timeout_ms > 60000) usage_error("--timeout-ms wants 1..60000");
    if (!kv.empty()) usage_error("unknown option --" + kv.begin()->first);
    return o;
}

std::uint16_t internet_checksum(const std::uint8_t* p, std::size_t n) {
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i + 1 < n; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n % 2) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
}

void put16(std::uint8_t* p, std::uint16_t v) { p[0] = static_cast<std::uint8_t>(v >> 8); p[1] = static_cast<std::uint8_t>(v); }
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

// An IPv4 ICMP echo request with a recognisable payload of payload_len bytes.
Bytes icmp_echo_request(const Options& o, std::uint16_t id, std::uint16_t seq, std::size_t payload_len) {
    Bytes pkt(20 + 8 + payload_len);
    std::uint8_t* ip = pkt.data();
    ip[0] = 0x45;
    put16(ip + 2, static_cast<std::uint16_t>(pkt.size()));
    put16(ip + 4, seq);
    ip[6] = 0x40;  // DF
    ip[8] = 64;
    ip[9] = 1;     // ICMP
    std::memcpy(ip + 12, o.inner_src.data(), 4);
    std::memcpy(ip + 16, o.inner_dst.data(), 4);
    put16(ip + 10, internet_checksum(ip, 20));
    std::uint8_t* icmp = ip + 20;
    icmp[0] = kIcmpEchoRequest;
    put16(icmp + 4, id);
    put16(icmp + 6, seq);
    for (std::size_t i = 0; i < payload_len; ++i) icmp[8 + i] = static_cast<std::uint8_t>(i * 7 + seq);
    put16(icmp + 2, internet_checksum(icmp, 8 + payload_len));
    return pkt;
}

// True when inner is the kernel's echo reply to request.
bool is_echo_reply_to(std::span<const std::uint8_t> inner, const Bytes& request) {
    if (inner.size() != request.size() || inner.size() < 28) return false;
    if (inner[0] != 0x45 || inner[9] != 1) return false;
    if (std::memcmp(inner.data() + 12, request.data() + 16, 4) != 0) return false;  // src = our dst
    if (std::memcmp(inner.data() + 16, request.data() + 12, 4) != 0) return false;
    const std::uint8_t* icmp = inner.data() + 20;
    if (icmp[0] != kIcmpEchoReply) return false;
    if (get16(icmp + 4) != get16(request.data() + 24) || get16(icmp + 6) != get16(request.data() + 26)) return false;
    return std::memcmp(icmp + 8, request.data() + 28, request.size() - 28) == 0;
}

class KernelPeerSession {
public:
    KernelPeerSession(const Options& o, EspOutboundSa out, EspInboundSas in)
        : opts_(o), out_(std::move(out)), in_(std::move(in)) {}

    bool open_socket() {
        fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return false;
        const int one = 1;
        setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd_, reinterpret_cast<const sockaddr*>(&opts_.local), sizeof opts_.local) != 0) return false;
        return connect(fd_, reinterpret_cast<const sockaddr*>(&opts_.remote), sizeof opts_.remote) == 0;
    }
    ~KernelPeerSession() { if (fd_ >= 0) close(fd_); }

    // Seals an inner IPv4 packet; the ESP bytes (UDP payload) are returned.
    std::optional<Bytes> seal(const Bytes& inner) {
        std::array<std::uint8_t, kBufferSize> buf{};
        if (inner.size() + kEspMaxHeadroom + kEspMaxTailroom > buf.size()) return std::nullopt;
        std::memcpy(buf.data() + kEspMaxHeadroom, inner.data(), inner.size());
        const EspSealResult r = out_.seal(buf, kEspMaxHeadroom, inner.size(), kEspNextHeaderIpv4);
        if (!r.ok()) {
            std::printf("  seal failed: %.*s\n", static_cast<int>(describe(r.status).size()), describe(r.status).data());
            return std::nullopt;
        }
        return Bytes(r.packet.begin(), r.packet.end());
    }

    bool send(const Bytes& esp) { return ::send(fd_, esp.data(), esp.size(), 0) == static_cast<ssize_t>(esp.size()); }

    // The next datagram from the kernel, or nothing within the timeout.
    std::optional<Bytes> receive(int timeout_ms) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) != 1) return std::nullopt;
        Bytes d(kBufferSize);
        const ssize_t n = recv(fd_, d.data(), d.size(), 0);
        if (n <= 0) return std::nullopt;
        d.resize(static_cast<std::size_t>(n));
        return d;
    }

    // Opens a copy of the datagram (the engine decrypts in place), counting the reason.
    EspReceived open(Bytes& datagram) {
        EspReceived r = in_.open(datagram);
        ++drops_[r.drop];
        return r;
    }

    std::size_t count(EspDrop d) const { auto it = drops_.find(d); return it == drops_.end() ? 0 : it->second; }
    const Options& opts() const { return opts_; }
    std::uint64_t next_sequence() const { return out_.next_sequence(); }

private:
    const Options& opts_;
    EspOutboundSa out_;
    EspInboundSas in_;
    int fd_ = -1;
    std::map<EspDrop, std::size_t> drops_;
};

int g_failures = 0;

void report(const char* name, bool pass, const std::string& detail) {
    std::printf("CHECK %-24s %s %s\n", name, pass ? "PASS" : "FAIL", detail.c_str());
    std::fflush(stdout);
    if (!pass) ++g_failures;
}

std::string drop_text(EspDrop d) { auto s = describe(d); return std::string(s.begin(), s.end()); }

// We seal, the kernel opens and answers, we open the answer: both directions.
// Returns the kernel's reply datagram as received (before opening) for later checks.
std::optional<Bytes> round_trip(KernelPeerSession& s, const Bytes& request, std::string& why) {
    auto esp = s.seal(request);
    if (!esp) { why = "our seal failed"; return std::nullopt; }
    if (!s.send(*esp)) { why = "send failed"; return std::nullopt; }
    auto reply = s.receive(s.opts().timeout_ms);
    if (!reply) { why = "no reply from the kernel (it did not accept our packet)"; return std::nullopt; }
    Bytes opened = *reply;
    EspReceived r = s.open(opened);
    if (!r.ok()) { why = "kernel's reply rejected by us: " + drop_text(r.drop); return std::nullopt; }
    if (!is_echo_reply_to(r.inner, request)) { why = "kernel's reply opened but is not our echo reply"; return std::nullopt; }
    return reply;
}

void run_checks(KernelPeerSession& s) {
    const Options& o = s.opts();
    std::uint16_t seq = 1;

    // The GP magic ping: the reply must be recognised as one.
    {
        std::array<std::uint8_t, kGpProbeMaxSize> probe{};
        GpProbe p = build_gp_probe(probe, o.inner_src, o.inner_dst, seq++);
        bool ok = false;
        std::string why = "probe could not be built";
        if (p.size) {
            auto esp = s.seal(Bytes(probe.begin(), probe.begin() + static_cast<long>(p.size)));
            if (esp && s.send(*esp)) {
                auto reply = s.receive(o.timeout_ms);
                if (!reply) why = "no reply";
                else {
                    EspReceived r = s.open(*reply);
                    ok = r.ok() && is_gp_probe_reply(r.inner, o.inner_dst);
                    why = r.ok() ? (ok ? "kernel answered the magic ping" : "reply is not a probe reply")
                                 : "reply rejected: " + drop_text(r.drop);
                }
            }
        }
        report("gp-probe", ok, why);
    }

    // Echo requests across pad lengths and sizes: every one sealed by us, opened by the
    // kernel, answered, sealed by the kernel and opened by us.
    std::optional<Bytes> kept_reply;
    {
        const std::size_t sizes[] = {0, 1, 2, 13, 14, 15, 16, 17, 31, 32, 64, 255, 1000, 1300};
        int ok = 0, total = 0;
        std::string first_failure;
        for (std::size_t n : sizes) {
            ++total;
            std::string why;
            auto reply = round_trip(s, icmp_echo_request(o, 0x4b56, seq++, n), why);
            if (reply) { ++ok; kept_reply = reply; }
            else if (first_failure.empty()) first_failure = "payload " + std::to_string(n) + ": " + why;
        }
        report("echo-both-directions", ok == total,
               std::to_string(ok) + "/" + std::to_string(total) + " echo sizes 0..1300" +
                   (first_failure.empty() ? "" : "; " + first_failure));
    }

    // Tampered c2s packet: the kernel must drop it (its integrity counter rises) and not answer.
    {
        auto esp = s.seal(icmp_echo_request(o, 0x4b56, seq++, 32));
        bool pass = false;
        std::string detail = "seal failed";
        if (esp) {
            (*esp)[esp->size() / 2] ^= 0x01;
            s.send(*esp);
            auto reply = s.receive(1000);
            pass = !reply;
            detail = reply ? "the kernel answered a tampered packet" : "no reply (kernel counters checked by the script)";
        }
        report("kernel-drops-tampered", pass, detail);
    }

    // Replayed c2s packet: first copy answered, second one dropped (kernel replay counter).
    {
        const Bytes request = icmp_echo_request(o, 0x4b56, seq++, 48);
        auto esp = s.seal(request);
        bool pass = false;
        std::string detail = "seal failed";
        if (esp && s.send(*esp)) {
            auto first = s.receive(o.timeout_ms);
            s.send(*esp);
            auto second = s.receive(1000);
            pass = first && !second;
            detail = !first ? "the original was not answered" :
                     second ? "the kernel answered the replayed copy" : "original answered, replay not";
        }
        report("kernel-drops-replay", pass, detail);
    }

    // Kernel-sealed packets replayed to us: an already accepted datagram fed again, twice.
    {
        bool pass = false;
        std::string detail = "no kernel datagram kept";
        if (kept_reply) {
            Bytes a = *kept_reply, b = *kept_reply;
            EspReceived r1 = s.open(a), r2 = s.open(b);
            pass = r1.drop == EspDrop::replayed && r2.drop == EspDrop::replayed;
            detail = "re-fed twice: " + drop_text(r1.drop) + ", " + drop_text(r2.drop);
        }
        report("we-drop-replay", pass, detail);
    }

    // Kernel-sealed packet with one bit flipped (ICV, then ciphertext): bad_icv each time,
    // and the untouched original is still accepted afterwards (a forgery must not burn
    // its sequence number).
    {
        const Bytes request = icmp_echo_request(o, 0x4b56, seq++, 100);
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
                detail = "icv bit: " + drop_text(r1.drop) + ", body bit: " + drop_text(r2.drop) +
                         ", original: " + (r3.ok() ? std::string("accepted") : drop_text(r3.drop));
            }
        }
        report("we-drop-tampered", pass, detail);
    }

    std::printf("COUNTERS next_c2s_seq=%llu accepted=%zu replayed=%zu bad_icv=%zu\n",
                static_cast<unsigned long long>(s.next_sequence()), s.count(EspDrop::none),
                s.count(EspDrop::replayed), s.count(EspDrop::bad_icv));
}

std::pair<std::string, std::string> split_suite(const std::string& suite) {
    const auto plus = suite.find('+');
    if (plus == std::string::npos) return {suite, ""};
    return {suite.substr(0, plus), suite.substr(plus + 1)};
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    const auto [enc, auth] = split_suite(o.suite);
    auto c2s_keys = EspSaKeys::from_getconfig(enc, auth, o.c2s_ekey, o.c2s_akey);
    if (!c2s_keys) usage_error("c2s keys: " + c2s_keys.error().message);
    auto s2c_keys = EspSaKeys::from_getconfig(enc, auth, o.s2c_ekey, o.s2c_akey);
    if (!s2c_keys) usage_error("s2c keys: " + s2c_keys.error().message);
    auto out = EspOutboundSa::create(o.c2s_spi, *c2s_keys);
    if (!out) usage_error("outbound SA: " + out.error().message);
    auto in_sa = EspInboundSa::create(o.s2c_spi, *s2c_keys);
    if (!in_sa) usage_error("inbound SA: " + in_sa.error().message);
    EspInboundSas in;
    in.install(std::move(*in_sa));

    KernelPeerSession session(o, std::move(*out), std::move(in));
    if (!session.open_socket()) {
        std::fprintf(stderr, "esp-peer: cannot bind/connect the UDP socket: %s\n", std::strerror(errno));
        return 1;
    }
    run_checks(session);
    return g_failures == 0 ? 0 : 1;
}
