#include "protocols/broker/broker_message.h"

#include <sys/socket.h>

#include <csignal>
#include <type_traits>

#include "protocols/base/byte_order.h"

namespace espvpn::broker {

namespace {

// Bounds of the fields (the whole message is bounded by kMaxMessage as well).
constexpr std::size_t kMaxText = 4096;      // messages, addresses, domains, a path
constexpr std::size_t kMaxBanner = 16384;
constexpr std::size_t kMaxList = 8192;      // prefixes of a split list
constexpr std::size_t kMaxSmallList = 256;  // DNS servers, header pairs, login servers
constexpr std::size_t kMaxIfName = 15;      // IFNAMSIZ - 1

class Writer {
public:
    void u8(unsigned v) { out_.push_back(static_cast<std::uint8_t>(v)); }
    void u16(unsigned v) {
        std::uint8_t b[2];
        store_be16(b, v);
        out_.insert(out_.end(), b, b + 2);
    }
    void u32(std::uint64_t v) {
        std::uint8_t b[4];
        store_be32(b, v);
        out_.insert(out_.end(), b, b + 4);
    }
    void i32(int v) { u32(static_cast<std::uint32_t>(v)); }
    void str(std::string_view s) {
        u32(s.size());
        out_.insert(out_.end(), s.begin(), s.end());
    }
    void blob(const std::vector<std::uint8_t>& b) {
        u32(b.size());
        out_.insert(out_.end(), b.begin(), b.end());
    }
    std::vector<std::uint8_t> take() { return std::move(out_); }

private:
    std::vector<std::uint8_t> out_;
};

// Reads fields; the first failure sticks (later reads return zero values) and names the field.
class Reader {
public:
    explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
    bool failed() const { return !error_.empty(); }
    const std::string& error() const { return error_; }
    void fail(std::string why) {
        if (error_.empty()) error_ = std::move(why);
    }
    bool at_end() const { return pos_ == in_.size(); }

    std::uint64_t u8(const char* what) { return take(1, what) ? in_[pos_ - 1] : 0; }
    std::uint64_t u16(const char* what) { return take(2, what) ? load_be16(&in_[pos_ - 2]) : 0; }
    std::uint64_t u32(const char* what) { return take(4, what) ? load_be32(&in_[pos_ - 4]) : 0; }
    bool boolean(const char* what) {
        auto v = u8(what);
        if (v > 1) fail(std::string(what) + ": not a boolean");
        return v == 1;
    }
    int integer(const char* what, long long lo, long long hi) {
        const auto v = static_cast<long long>(static_cast<std::int32_t>(u32(what)));
        if (v < lo || v > hi) {
            fail(std::string(what) + ": " + std::to_string(v) + " is out of range");
            return 0;
        }
        return static_cast<int>(v);
    }
    std::string str(const char* what, std::size_t max) {
        const auto n = u32(what);
        if (n > max) {
            fail(std::string(what) + ": longer than " + std::to_string(max) + " bytes");
            return {};
        }
        if (!take(n, what)) return {};
        return std::string(reinterpret_cast<const char*>(&in_[pos_ - n]), n);
    }
    std::vector<std::uint8_t> blob(const char* what, std::size_t max) {
        const auto n = u32(what);
        if (n > max) {
            fail(std::string(what) + ": longer than " + std::to_string(max) + " bytes");
            return {};
        }
        if (!take(n, what)) return {};
        return {in_.begin() + static_cast<std::ptrdiff_t>(pos_ - n), in_.begin() + static_cast<std::ptrdiff_t>(pos_)};
    }
    std::size_t count(const char* what, std::size_t max) {
        const auto n = u16(what);
        if (n > max) {
            fail(std::string(what) + ": more than " + std::to_string(max) + " entries");
            return 0;
        }
        return n;
    }

private:
    bool take(std::size_t n, const char* what) {
        if (failed()) return false;
        if (in_.size() - pos_ < n) {
            fail(std::string(what) + ": the message ends early");
            return false;
        }
        pos_ += n;
        return true;
    }
    std::span<const std::uint8_t> in_;
    std::size_t pos_ = 0;
    std::string error_;
};

// Field checks (a failure is recorded in the reader).
bool has_control(std::string_view s, bool allow_newlines) {
    for (unsigned char c : s) {
        if (c == 0x7f || (c < 0x20 && !(allow_newlines && (c == '\n' || c == '\r' || c == '\t')))) return true;
    }
    return false;
}
std::string text(Reader& r, const char* what, std::size_t max = kMaxText) {
    std::string s = r.str(what, max);
    if (has_control(s, false)) r.fail(std::string(what) + ": a control character");
    return s;
}
std::string address(Reader& r, const char* what, bool may_be_empty) {
    std::string s = r.str(what, 64);
    if (r.failed() || (s.empty() && may_be_empty)) return s;
    if (!normalise_ip(s)) r.fail(std::string(what) + ": not a numeric IP address");
    return s;
}
std::string ifname(Reader& r, const char* what, bool may_be_empty) {
    std::string s = r.str(what, kMaxIfName);
    if (r.failed()) return s;
    if (s.empty() && !may_be_empty) r.fail(std::string(what) + ": empty");
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '-';
        if (!ok) {
            r.fail(std::string(what) + ": a character an interface name may not hold");
            break;
        }
    }
    if (s == "." || s == "..") r.fail(std::string(what) + ": not an interface name");
    return s;
}
std::string path(Reader& r, const char* what) {
    std::string s = r.str(what, kMaxText);
    if (r.failed()) return s;
    if (s.empty() || s[0] != '/') r.fail(std::string(what) + ": not an absolute path");
    else if (has_control(s, false)) r.fail(std::string(what) + ": a control character");
    return s;
}
// In its canonical text, so that what decodes re-encodes to the same bytes.
IpPrefix prefix(Reader& r, const char* what) {
    std::string s = r.str(what, 64);
    if (r.failed()) return {};
    auto p = IpPrefix::parse(s);
    if (!p || p->to_string() != s) {
        r.fail(std::string(what) + ": not a prefix in canonical form");
        return {};
    }
    return *p;
}
template <class E>
E enumeration(Reader& r, const char* what, unsigned last) {
    const auto v = r.u8(what);
    if (v > last) r.fail(std::string(what) + ": unknown value " + std::to_string(v));
    return static_cast<E>(v > last ? 0 : v);
}

void put(Writer& w, const TunnelConfig& c) {
    w.str(c.gateway_address);
    w.str(c.direct_udp_address);
    w.str(c.ip4_address);
    w.str(c.ip4_netmask);
    w.str(c.ip6_address);
    w.i32(c.ip6_prefix);
    w.i32(c.mtu);
    for (const auto* list : {&c.dns, &c.nbns, &c.split_dns}) {
        w.u16(list->size());
        for (const auto& s : *list) w.str(s);
    }
    w.str(c.default_domain);
    w.str(c.banner);
    w.str(c.proxy_pac);
    w.i32(c.idle_timeout_s);
    for (const auto* list : {&c.split_include, &c.split_exclude}) {
        w.u16(list->size());
        for (const auto& p : *list) w.str(p.to_string());
    }
    for (const auto* list : {&c.split_include_domains, &c.split_exclude_domains}) {
        w.u16(list->size());
        for (const auto& d : *list) w.str(d.to_string());
    }
    w.u16(c.protocol_options.size());
    for (const auto& [name, value] : c.protocol_options) {
        w.str(name);
        w.str(value);
    }
}

TunnelConfig get_config(Reader& r) {
    TunnelConfig c;
    c.gateway_address = address(r, "gateway address", true);
    c.direct_udp_address = address(r, "direct UDP address", true);
    c.ip4_address = address(r, "IPv4 address", true);
    c.ip4_netmask = r.str("IPv4 netmask", 64);
    if (!r.failed() && !c.ip4_netmask.empty() && !netmask_length(c.ip4_netmask)) r.fail("IPv4 netmask: not a netmask");
    c.ip6_address = address(r, "IPv6 address", true);
    c.ip6_prefix = r.integer("IPv6 prefix length", 0, 128);
    c.mtu = r.integer("MTU", 0, 65535);
    for (auto [list, what] : {std::pair{&c.dns, "DNS server"}, std::pair{&c.nbns, "NBNS server"}}) {
        const auto n = r.count(what, kMaxSmallList);
        for (std::size_t i = 0; i < n && !r.failed(); ++i) list->push_back(address(r, what, false));
    }
    {
        const auto n = r.count("split DNS domain", kMaxList);
        for (std::size_t i = 0; i < n && !r.failed(); ++i) c.split_dns.push_back(text(r, "split DNS domain", 255));
    }
    c.default_domain = text(r, "default domain");
    c.banner = r.str("banner", kMaxBanner);
    if (c.banner.find('\0') != std::string::npos) r.fail("banner: a NUL byte");
    c.proxy_pac = text(r, "proxy PAC URL");
    c.idle_timeout_s = r.integer("idle timeout", 0, 0x7fffffff);
    for (auto [list, what] : {std::pair{&c.split_include, "split include"}, std::pair{&c.split_exclude, "split exclude"}}) {
        const auto n = r.count(what, kMaxList);
        for (std::size_t i = 0; i < n && !r.failed(); ++i) list->push_back(prefix(r, what));
    }
    for (auto [list, what] : {std::pair{&c.split_include_domains, "split include domain"},
                              std::pair{&c.split_exclude_domains, "split exclude domain"}}) {
        const auto n = r.count(what, kMaxList);
        for (std::size_t i = 0; i < n && !r.failed(); ++i) {
            std::string s = r.str(what, 300);
            if (r.failed()) break;
            auto d = SplitDomain::parse(s);
            if (!d || d->to_string() != s) {
                r.fail(std::string(what) + ": not a domain in canonical form");
                break;
            }
            list->push_back(*d);
        }
    }
    const auto n = r.count("protocol option", kMaxSmallList);
    for (std::size_t i = 0; i < n && !r.failed(); ++i) {
        std::string name = text(r, "protocol option name", 128);
        std::string value = text(r, "protocol option value");
        if (name.empty() || name.find_first_of(" :=") != std::string::npos) r.fail("protocol option name: not a header name");
        c.protocol_options.emplace_back(std::move(name), std::move(value));
    }
    return c;
}

bool allowed_signal(int s) { return s == SIGTERM || s == SIGINT || s == SIGHUP || s == SIGUSR1 || s == SIGUSR2; }

}  // namespace

std::string_view type_name(Type t) {
    switch (t) {
        case Type::bring_up: return "bring_up";
        case Type::run_script: return "run_script";
        case Type::queue_script: return "queue_script";
        case Type::tear_down: return "tear_down";
        case Type::add_domain_route: return "add_domain_route";
        case Type::remove_domain_route: return "remove_domain_route";
        case Type::point_dns_at: return "point_dns_at";
        case Type::set_mtu: return "set_mtu";
        case Type::open_udp: return "open_udp";
        case Type::open_dns_listener: return "open_dns_listener";
        case Type::read_state: return "read_state";
        case Type::write_state: return "write_state";
        case Type::remove_state: return "remove_state";
        case Type::open_captive_exception: return "open_captive_exception";
        case Type::open_probe_socket: return "open_probe_socket";
        case Type::reply: return "reply";
        case Type::tun_reply: return "tun_reply";
        case Type::state_reply: return "state_reply";
        case Type::signal_event: return "signal_event";
    }
    return "unknown";
}

Type type_of(const Message& m) {
    static constexpr Type kTypes[] = {Type::bring_up,         Type::run_script,        Type::queue_script,
                                      Type::tear_down,        Type::add_domain_route,  Type::remove_domain_route,
                                      Type::point_dns_at,     Type::set_mtu,           Type::open_udp,
                                      Type::open_dns_listener, Type::read_state,       Type::write_state,
                                      Type::remove_state,     Type::open_captive_exception, Type::open_probe_socket, Type::reply,             Type::tun_reply,
                                      Type::state_reply,      Type::signal_event};
    static_assert(std::size(kTypes) == std::variant_size_v<Message>);
    return kTypes[m.index()];
}

std::vector<std::uint8_t> encode(const Message& m) {
    Writer w;
    w.u16(kVersion);
    w.u16(static_cast<unsigned>(type_of(m)));
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, BringUp>) {
                put(w, v.config);
                w.i32(v.mtu);
                w.u16(v.login_servers.size());
                for (const auto& s : v.login_servers) {
                    w.str(s.address);
                    w.i32(s.port);
                }
            } else if constexpr (std::is_same_v<T, RunScript> || std::is_same_v<T, QueueScript>) {
                w.u8(static_cast<unsigned>(v.reason));
            } else if constexpr (std::is_same_v<T, AddDomainRoute> || std::is_same_v<T, RemoveDomainRoute>) {
                w.str(v.address.to_string());
                w.u8(v.include);
            } else if constexpr (std::is_same_v<T, PointDnsAt>) {
                w.str(v.forwarder);
            } else if constexpr (std::is_same_v<T, SetMtu>) {
                w.i32(v.mtu);
            } else if constexpr (std::is_same_v<T, TearDown>) {
                w.u8(v.hold_kill_switch);
            } else if constexpr (std::is_same_v<T, OpenCaptiveException>) {
                w.i32(v.seconds);
            } else if constexpr (std::is_same_v<T, OpenProbeSocket>) {
                w.u8(v.family == AF_INET6 ? 6 : v.family == AF_INET ? 4 : 0);
            } else if constexpr (std::is_same_v<T, OpenUdp>) {
                w.u8(v.family == AF_INET6 ? 6 : v.family == AF_INET ? 4 : 0);
                w.i32(v.send_buffer);
                w.i32(v.receive_buffer);
            } else if constexpr (std::is_same_v<T, OpenDnsListener>) {
                w.str(v.address);
                w.i32(v.port);
                w.str(v.device);
            } else if constexpr (std::is_same_v<T, ReadState> || std::is_same_v<T, RemoveState>) {
                w.str(v.path);
            } else if constexpr (std::is_same_v<T, WriteState>) {
                w.str(v.path);
                w.blob(v.bytes);
                w.u8(v.sync);
                w.i32(v.mode);
            } else if constexpr (std::is_same_v<T, Reply>) {
                w.u16(static_cast<unsigned>(v.to));
                w.u8(v.ok);
                w.str(v.text);
                w.u32(v.count);
                w.blob(v.data);
            } else if constexpr (std::is_same_v<T, TunReply>) {
                w.u8(v.ok);
                w.str(v.error);
                w.str(v.name);
                w.i32(v.ifindex);
                w.u8(v.vnet_hdr);
                w.u32(v.offload_flags);
                w.u8(v.domain_routes_possible);
                w.i32(v.mtu);
            } else if constexpr (std::is_same_v<T, StateReply>) {
                w.u16(static_cast<unsigned>(v.to));
                w.u8(v.ok);
                w.str(v.error);
                w.u8(v.found);
                w.u32(v.uid);
                w.u32(v.gid);
                w.u32(v.mode);
                w.blob(v.data);
            } else if constexpr (std::is_same_v<T, SignalEvent>) {
                w.i32(v.signo);
            }
        },
        m);
    return w.take();
}

Result<Message> decode(std::span<const std::uint8_t> bytes) {
    if (bytes.size() > kMaxMessage) return make_error("broker message: longer than " + std::to_string(kMaxMessage) + " bytes");
    Reader r(bytes);
    const auto version = r.u16("version");
    const auto type = r.u16("type");
    if (r.failed()) return make_error("broker message: " + r.error());
    if (version != kVersion) return make_error("broker message: version " + std::to_string(version) + ", expected " +
                                               std::to_string(kVersion));
    Message m = TearDown{};
    switch (static_cast<Type>(type)) {
        case Type::bring_up: {
            BringUp b;
            b.config = get_config(r);
            b.mtu = r.integer("tun MTU", 0, 65535);
            const auto n = r.count("login server", kMaxSmallList);
            for (std::size_t i = 0; i < n && !r.failed(); ++i) {
                LoginServer s;
                s.address = address(r, "login server", false);
                s.port = r.integer("login server port", 1, 65535);
                b.login_servers.push_back(std::move(s));
            }
            m = std::move(b);
            break;
        }
        case Type::run_script:
            m = RunScript{enumeration<ScriptReason>(r, "script reason", static_cast<unsigned>(ScriptReason::reconnect))};
            break;
        case Type::queue_script:
            m = QueueScript{enumeration<ScriptReason>(r, "script reason", static_cast<unsigned>(ScriptReason::reconnect))};
            break;
        case Type::tear_down: m = TearDown{r.boolean("hold kill switch")}; break;
        case Type::open_captive_exception:
            m = OpenCaptiveException{r.integer("exception seconds", kMinCaptiveSeconds, kMaxCaptiveSeconds)};
            break;
        case Type::open_probe_socket: {
            const auto f = r.u8("address family");
            if (f != 4 && f != 6) r.fail("address family: neither 4 nor 6");
            m = OpenProbeSocket{f == 6 ? AF_INET6 : AF_INET};
            break;
        }
        case Type::add_domain_route:
        case Type::remove_domain_route: {
            IpPrefix p = prefix(r, "domain route");
            const bool include = r.boolean("include");
            if (static_cast<Type>(type) == Type::add_domain_route) m = AddDomainRoute{p, include};
            else m = RemoveDomainRoute{p, include};
            break;
        }
        case Type::point_dns_at: m = PointDnsAt{address(r, "DNS forwarder", true)}; break;
        case Type::set_mtu: m = SetMtu{r.integer("MTU", 68, 65535)}; break;
        case Type::open_udp: {
            const auto f = r.u8("address family");
            if (f != 4 && f != 6) r.fail("address family: neither 4 nor 6");
            OpenUdp o{f == 6 ? AF_INET6 : AF_INET, 0, 0};
            o.send_buffer = r.integer("send buffer", 0, 64 << 20);
            o.receive_buffer = r.integer("receive buffer", 0, 64 << 20);
            m = o;
            break;
        }
        case Type::open_dns_listener: {
            OpenDnsListener o;
            o.address = address(r, "listener address", false);
            o.port = r.integer("listener port", 1, 65535);
            o.device = ifname(r, "listener device", true);
            m = std::move(o);
            break;
        }
        case Type::read_state: m = ReadState{path(r, "state path")}; break;
        case Type::remove_state: m = RemoveState{path(r, "state path")}; break;
        case Type::write_state: {
            WriteState s;
            s.path = path(r, "state path");
            s.bytes = r.blob("state bytes", kMaxStateBytes);
            s.sync = r.boolean("sync");
            s.mode = r.integer("file mode", 0, 0777);
            m = std::move(s);
            break;
        }
        case Type::reply: {
            Reply p;
            const auto to = r.u16("reply to");
            if (!r.failed() && (to < static_cast<unsigned>(Type::run_script) || to > static_cast<unsigned>(Type::open_probe_socket)))
                r.fail("reply to: not a request that gets a reply");
            p.to = static_cast<Type>(to);
            p.ok = r.boolean("ok");
            p.text = r.str("reply text", kMaxText);
            p.count = static_cast<std::uint32_t>(r.u32("route count"));
            p.data = r.blob("reply data", kMaxStateBytes);
            m = std::move(p);
            break;
        }
        case Type::tun_reply: {
            TunReply t;
            t.ok = r.boolean("ok");
            t.error = r.str("error", kMaxText);
            t.name = ifname(r, "tun name", !t.ok);
            t.ifindex = r.integer("tun ifindex", t.ok ? 1 : 0, 0x7fffffff);
            t.vnet_hdr = r.boolean("vnet header");
            t.offload_flags = static_cast<std::uint32_t>(r.u32("offload flags"));
            if (t.offload_flags > 0xff) r.fail("offload flags: unknown bits");
            t.domain_routes_possible = r.boolean("domain routes possible");
            t.mtu = r.integer("tun MTU", 0, 65535);
            m = std::move(t);
            break;
        }
        case Type::state_reply: {
            StateReply p;
            const auto to = r.u16("reply to");
            if (!r.failed() && to != static_cast<unsigned>(Type::read_state) && to != static_cast<unsigned>(Type::remove_state))
                r.fail("reply to: not read_state or remove_state");
            p.to = static_cast<Type>(to);
            p.ok = r.boolean("ok");
            p.error = r.str("error", kMaxText);
            p.found = r.boolean("found");
            p.uid = static_cast<std::uint32_t>(r.u32("uid"));
            p.gid = static_cast<std::uint32_t>(r.u32("gid"));
            p.mode = static_cast<std::uint32_t>(r.u32("mode"));
            if (p.mode > 07777) r.fail("mode: not permission bits");
            p.data = r.blob("state bytes", kMaxStateBytes);
            m = std::move(p);
            break;
        }
        case Type::signal_event: {
            const int s = r.integer("signal", 1, 64);
            if (!r.failed() && !allowed_signal(s)) r.fail("signal: " + std::to_string(s) + " is not forwarded");
            m = SignalEvent{s};
            break;
        }
        default: return make_error("broker message: unknown type " + std::to_string(type));
    }
    if (!r.failed() && !r.at_end()) r.fail("bytes after the last field");
    if (r.failed()) return make_error("broker message " + std::string(type_name(static_cast<Type>(type))) + ": " + r.error());
    return m;
}

Status BrokerState::admit(Type t) const {
    auto refuse = [&](const char* when) {
        return make_error("the broker refuses " + std::string(type_name(t)) + " " + when);
    };
    switch (t) {
        case Type::reply:
        case Type::tun_reply:
        case Type::state_reply:
        case Type::signal_event: return refuse("(not a request)");
        case Type::open_udp:
        case Type::open_dns_listener:
        case Type::read_state:
        case Type::write_state:
        case Type::remove_state: return {};
        case Type::bring_up:
            // Again after a tear-down: --always-on's next session brings up a new tun.
            if (phase_ == Phase::up) return refuse("while the host is up");
            return {};
        case Type::tear_down:
            if (phase_ == Phase::down) return refuse("after the tear-down");
            return {};
        case Type::open_probe_socket:
            if (phase_ != Phase::up && !captive_) return refuse("without a tun or a captive portal");
            return {};
        case Type::open_captive_exception:
            if (!captive_) return refuse("unless the kill switch was held for a captive portal");
            if (exception_opened_) return refuse("twice for one captive portal");
            return {};
        default:
            if (phase_ != Phase::up) return refuse(phase_ == Phase::down ? "after the tear-down" : "before the host is up");
            return {};
    }
}

void BrokerState::after(Type t, bool ok, bool held) {
    if (t == Type::bring_up) captive_ = exception_opened_ = false;
    if (t == Type::tear_down) captive_ = held && ok;
    if (t == Type::open_captive_exception) exception_opened_ = true;
    if (t == Type::bring_up && ok) phase_ = Phase::up;
    if (t == Type::bring_up && !ok) phase_ = Phase::down;  // a failed bring-up has been undone
    if (t == Type::tear_down) phase_ = Phase::down;
}

}  // namespace espvpn::broker
