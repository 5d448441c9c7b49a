#include "src/io/rtnetlink.h"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::io {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// A netlink request assembled in a fixed buffer: header, family struct, attributes.
struct Request {
    alignas(NLMSG_ALIGNTO) std::uint8_t buf[512] = {};
    nlmsghdr* hdr() { return reinterpret_cast<nlmsghdr*>(buf); }

    Request(std::uint16_t type, std::uint16_t flags, const void* body, std::size_t body_len) {
        hdr()->nlmsg_type = type;
        hdr()->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
        hdr()->nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(body_len));
        std::memcpy(NLMSG_DATA(hdr()), body, body_len);
    }
    void attr(std::uint16_t type, const void* data, std::size_t len) {
        std::size_t at = NLMSG_ALIGN(hdr()->nlmsg_len);
        auto* rta = reinterpret_cast<rtattr*>(buf + at);
        rta->rta_type = type;
        rta->rta_len = static_cast<std::uint16_t>(RTA_LENGTH(len));
        std::memcpy(RTA_DATA(rta), data, len);
        hdr()->nlmsg_len = static_cast<std::uint32_t>(at + RTA_ALIGN(rta->rta_len));
    }
    void attr_u32(std::uint16_t type, std::uint32_t v) { attr(type, &v, sizeof v); }
};

}  // namespace

Result<InterfaceAddress> InterfaceAddress::parse(std::string_view text) {
    auto a = parse_address_length(text);  // the one prefix grammar (protocols/tunnel)
    if (!a) return a.error();
    InterfaceAddress p;
    p.family = a->v6 ? AF_INET6 : AF_INET;
    std::memcpy(p.address, a->bytes, sizeof p.address);
    p.prefix_len = static_cast<std::uint8_t>(a->length);
    return p;
}

std::string InterfaceAddress::to_string() const {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(family, address, text, sizeof text);
    return std::string(text) + "/" + std::to_string(prefix_len);
}

bool InterfaceAddress::operator==(const InterfaceAddress& other) const {
    return family == other.family && prefix_len == other.prefix_len &&
           std::memcmp(address, other.address, 16) == 0;
}

Result<RtNetlink> RtNetlink::open() {
    int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return make_error("rtnetlink socket: " + errno_text(errno));
    sockaddr_nl local{};
    local.nl_family = AF_NETLINK;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
        int err = errno;
        ::close(fd);
        return make_error("rtnetlink bind: " + errno_text(err));
    }
    return RtNetlink(fd);
}

Status RtNetlink::send_request(void* request, std::size_t length, const char* what) {
    auto* hdr = static_cast<nlmsghdr*>(request);
    hdr->nlmsg_seq = ++seq_;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd_.get(), request, length, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
        return make_error(std::string(what) + ": netlink send: " + errno_text(errno));
    return {};
}

Status RtNetlink::transact(void* request, std::size_t length, const char* what,
                           const std::function<void(const nlmsghdr&)>& on_reply, int* error) {
    if (error) *error = 0;
    if (Status sent = send_request(request, length, what); !sent) return sent;
    alignas(NLMSG_ALIGNTO) std::uint8_t reply[8192];
    for (int attempts = 0; attempts < 16; ++attempts) {
        ssize_t n = ::recv(fd_.get(), reply, sizeof reply, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return make_error(std::string(what) + ": netlink receive: " + errno_text(errno));
        }
        int left = static_cast<int>(n);
        for (auto* m = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
            if (m->nlmsg_seq != seq_) continue;
            if (m->nlmsg_type != NLMSG_ERROR) {
                if (on_reply) on_reply(*m);
                continue;
            }
            if (m->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return make_error(std::string(what) + ": short netlink ack");
            const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(m));
            if (err->error == 0) return {};
            if (error) *error = -err->error;
            return make_error(std::string(what) + ": " + errno_text(-err->error));
        }
    }
    return make_error(std::string(what) + ": no netlink acknowledgement");
}

Status RtNetlink::dump(void* request, std::size_t length, const char* what,
                       const std::function<void(const nlmsghdr&)>& on_reply) {
    if (Status sent = send_request(request, length, what); !sent) return sent;
    alignas(NLMSG_ALIGNTO) std::uint8_t reply[32768];
    for (int reads = 0; reads < 4096; ++reads) {  // a routing table of some 100 000 routes at most
        ssize_t n = ::recv(fd_.get(), reply, sizeof reply, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return make_error(std::string(what) + ": netlink receive: " + errno_text(errno));
        }
        int left = static_cast<int>(n);
        for (auto* m = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
            if (m->nlmsg_seq != seq_) continue;
            if (m->nlmsg_type == NLMSG_DONE) return {};
            if (m->nlmsg_type == NLMSG_ERROR) {
                if (m->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return make_error(std::string(what) + ": short netlink error");
                const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(m));
                if (err->error == 0) return {};
                return make_error(std::string(what) + ": " + errno_text(-err->error));
            }
            on_reply(*m);
        }
    }
    return make_error(std::string(what) + ": the dump did not end");
}

Status RtNetlink::set_link_u32(int ifindex, std::uint16_t attr, std::uint32_t value, const std::string& what) {
    ifinfomsg info{};
    info.ifi_family = AF_UNSPEC;
    info.ifi_index = ifindex;
    Request r(RTM_NEWLINK, 0, &info, sizeof info);
    r.attr_u32(attr, value);
    return transact(r.buf, r.hdr()->nlmsg_len, (what + " " + std::to_string(value)).c_str());
}

Status RtNetlink::set_mtu(int ifindex, unsigned mtu) { return set_link_u32(ifindex, IFLA_MTU, mtu, "set MTU"); }

Status RtNetlink::set_tx_queue_len(int ifindex, unsigned packets) {
    return set_link_u32(ifindex, IFLA_TXQLEN, packets, "set txqueuelen");
}

Status RtNetlink::set_up(int ifindex, bool up) {
    ifinfomsg info{};
    info.ifi_family = AF_UNSPEC;
    info.ifi_index = ifindex;
    info.ifi_change = IFF_UP;
    info.ifi_flags = up ? IFF_UP : 0;
    Request r(RTM_NEWLINK, 0, &info, sizeof info);
    return transact(r.buf, r.hdr()->nlmsg_len, up ? "set link up" : "set link down");
}

namespace {
Request address_request(std::uint16_t type, std::uint16_t flags, int ifindex, const InterfaceAddress& p) {
    ifaddrmsg msg{};
    msg.ifa_family = static_cast<std::uint8_t>(p.family);
    msg.ifa_prefixlen = p.prefix_len;
    msg.ifa_index = static_cast<std::uint32_t>(ifindex);
    msg.ifa_scope = RT_SCOPE_UNIVERSE;
    Request r(type, flags, &msg, sizeof msg);
    std::size_t len = p.family == AF_INET ? 4 : 16;
    r.attr(IFA_LOCAL, p.address, len);
    r.attr(IFA_ADDRESS, p.address, len);
    return r;
}

// A main-table route; with a next hop (`via`, same family) it is a universe
// route through that router, without one a link route on the device.
Request route_request(std::uint16_t type, std::uint16_t flags, int ifindex, const InterfaceAddress& p, unsigned metric,
                      const std::uint8_t* via = nullptr, std::uint32_t table = RT_TABLE_MAIN) {
    rtmsg msg{};
    msg.rtm_family = static_cast<std::uint8_t>(p.family);
    msg.rtm_dst_len = p.prefix_len;
    msg.rtm_table = static_cast<std::uint8_t>(table < 256 ? table : static_cast<std::uint32_t>(RT_TABLE_UNSPEC));
    msg.rtm_protocol = RTPROT_STATIC;
    msg.rtm_scope = via ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
    msg.rtm_type = RTN_UNICAST;
    Request r(type, flags, &msg, sizeof msg);
    // Zero the host bits: the kernel rejects a destination that has them set.
    std::uint8_t dst[16] = {};
    std::size_t len = p.family == AF_INET ? 4 : 16;
    for (std::size_t bit = 0; bit < p.prefix_len; ++bit)
        dst[bit / 8] |= static_cast<std::uint8_t>(p.address[bit / 8] & (0x80 >> (bit % 8)));
    r.attr(RTA_DST, dst, len);
    if (via) r.attr(RTA_GATEWAY, via, len);
    r.attr_u32(RTA_OIF, static_cast<std::uint32_t>(ifindex));
    if (metric) r.attr_u32(RTA_PRIORITY, metric);
    if (table >= 256) r.attr_u32(RTA_TABLE, table);
    return r;
}

Request rule_request(std::uint16_t type, std::uint16_t flags, int family, std::uint32_t fwmark, std::uint32_t table,
                     std::uint32_t priority) {
    fib_rule_hdr h{};
    h.family = static_cast<std::uint8_t>(family);
    h.action = FR_ACT_TO_TBL;
    h.table = static_cast<std::uint8_t>(table < 256 ? table : static_cast<std::uint32_t>(RT_TABLE_UNSPEC));
    Request r(type, flags, &h, sizeof h);
    r.attr_u32(FRA_FWMARK, fwmark);
    r.attr_u32(FRA_FWMASK, 0xffffffffu);
    r.attr_u32(FRA_TABLE, table);
    r.attr_u32(FRA_PRIORITY, priority);
    return r;
}
}  // namespace

Status RtNetlink::add_address(int ifindex, const InterfaceAddress& prefix) {
    Request r = address_request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, ifindex, prefix);
    return transact(r.buf, r.hdr()->nlmsg_len, ("add address " + prefix.to_string()).c_str());
}

Status RtNetlink::delete_address(int ifindex, const InterfaceAddress& prefix) {
    Request r = address_request(RTM_DELADDR, 0, ifindex, prefix);
    return transact(r.buf, r.hdr()->nlmsg_len, ("delete address " + prefix.to_string()).c_str());
}

Status RtNetlink::add_route(int ifindex, const InterfaceAddress& destination, unsigned metric) {
    Request r = route_request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, ifindex, destination, metric);
    return transact(r.buf, r.hdr()->nlmsg_len, ("add route " + destination.to_string()).c_str());
}

Status RtNetlink::delete_route(int ifindex, const InterfaceAddress& destination, unsigned metric) {
    Request r = route_request(RTM_DELROUTE, 0, ifindex, destination, metric);
    return transact(r.buf, r.hdr()->nlmsg_len, ("delete route " + destination.to_string()).c_str());
}

std::string RouteNextHop::gateway_text() const {
    if (!has_gateway) return "";
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(family, gateway, text, sizeof text);
    return text;
}

Result<std::optional<RouteNextHop>> RtNetlink::get_route(const InterfaceAddress& address, std::string* why) {
    rtmsg msg{};
    msg.rtm_family = static_cast<std::uint8_t>(address.family);
    msg.rtm_dst_len = address.family == AF_INET ? 32 : 128;
    Request r(RTM_GETROUTE, 0, &msg, sizeof msg);
    r.attr(RTA_DST, address.address, address.family == AF_INET ? 4 : 16);
    std::optional<RouteNextHop> found;
    std::string reason = "no reply";
    auto on_reply = [&](const nlmsghdr& m) {
        if (m.nlmsg_type != RTM_NEWROUTE || m.nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return;
        const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(&m));
        if (rt->rtm_type != RTN_UNICAST) {
            reason = rt->rtm_type == RTN_LOCAL ? "a local address" : "not a unicast route";
            return;
        }
        RouteNextHop hop;
        hop.family = rt->rtm_family;
        const std::size_t addr_len = hop.family == AF_INET ? 4 : 16;
        int left = static_cast<int>(RTM_PAYLOAD(&m));
        for (const rtattr* a = RTM_RTA(rt); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
            if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= 4) {
                std::uint32_t oif;
                std::memcpy(&oif, RTA_DATA(a), 4);
                hop.ifindex = static_cast<int>(oif);
            } else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == addr_len) {
                std::memcpy(hop.gateway, RTA_DATA(a), addr_len);
                hop.has_gateway = true;
            }
        }
        if (hop.ifindex > 0) found = hop;
        else reason = "no output device";
    };
    int err = 0;
    Status s = transact(r.buf, r.hdr()->nlmsg_len, ("route get " + address.to_string()).c_str(), on_reply, &err);
    if (!s) {
        if (err == ENETUNREACH || err == EHOSTUNREACH) reason = errno_text(err);
        else return make_error(s.error().message);
    }
    if (!found && why) *why = reason;
    return found;
}

Result<std::vector<RouteNextHop>> RtNetlink::default_routes(int family, int skip_ifindex) {
    rtmsg msg{};
    msg.rtm_family = static_cast<std::uint8_t>(family);
    Request r(RTM_GETROUTE, NLM_F_DUMP, &msg, sizeof msg);
    r.hdr()->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;  // no ACK: the dump ends with NLMSG_DONE
    std::vector<std::pair<std::uint32_t, RouteNextHop>> found;
    auto on_reply = [&](const nlmsghdr& m) {
        if (m.nlmsg_type != RTM_NEWROUTE || m.nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return;
        const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(&m));
        if (rt->rtm_family != family || rt->rtm_dst_len != 0 || rt->rtm_type != RTN_UNICAST) return;
        std::uint32_t table = rt->rtm_table, metric = 0;
        RouteNextHop hop;
        hop.family = family;
        const std::size_t addr_len = family == AF_INET ? 4 : 16;
        int left = static_cast<int>(RTM_PAYLOAD(&m));
        for (const rtattr* a = RTM_RTA(rt); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
            if (RTA_PAYLOAD(a) >= 4 && a->rta_type == RTA_OIF) {
                std::uint32_t oif;
                std::memcpy(&oif, RTA_DATA(a), 4);
                hop.ifindex = static_cast<int>(oif);
            } else if (RTA_PAYLOAD(a) >= 4 && a->rta_type == RTA_TABLE) {
                std::memcpy(&table, RTA_DATA(a), 4);
            } else if (RTA_PAYLOAD(a) >= 4 && a->rta_type == RTA_PRIORITY) {
                std::memcpy(&metric, RTA_DATA(a), 4);
            } else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == addr_len) {
                std::memcpy(hop.gateway, RTA_DATA(a), addr_len);
                hop.has_gateway = true;
            }
        }
        if (table == RT_TABLE_MAIN && hop.ifindex > 0 && hop.ifindex != skip_ifindex) found.emplace_back(metric, hop);
    };
    if (Status s = dump(r.buf, r.hdr()->nlmsg_len, "route dump", on_reply); !s) return s.error();
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<RouteNextHop> out;
    for (auto& f : found) out.push_back(f.second);
    return out;
}

Status RtNetlink::add_route_via(const InterfaceAddress& destination, const RouteNextHop& hop, bool* exists) {
    Request r = route_request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, hop.ifindex, destination, 0,
                              hop.has_gateway ? hop.gateway : nullptr);
    int err = 0;
    Status s = transact(r.buf, r.hdr()->nlmsg_len, ("add route " + destination.to_string()).c_str(), {}, &err);
    if (exists) *exists = err == EEXIST;
    return s;
}

Status RtNetlink::replace_route_in(std::uint32_t table, const InterfaceAddress& destination, const RouteNextHop& hop) {
    Request r = route_request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, hop.ifindex, destination, 0,
                              hop.has_gateway ? hop.gateway : nullptr, table);
    return transact(r.buf, r.hdr()->nlmsg_len,
                    ("add route " + destination.to_string() + " table " + std::to_string(table)).c_str());
}

Status RtNetlink::delete_route_in(std::uint32_t table, const InterfaceAddress& destination, const RouteNextHop& hop) {
    Request r = route_request(RTM_DELROUTE, 0, hop.ifindex, destination, 0, hop.has_gateway ? hop.gateway : nullptr, table);
    return transact(r.buf, r.hdr()->nlmsg_len,
                    ("delete route " + destination.to_string() + " table " + std::to_string(table)).c_str());
}

Status RtNetlink::add_fwmark_rule(int family, std::uint32_t fwmark, std::uint32_t table, std::uint32_t priority) {
    Request r = rule_request(RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, family, fwmark, table, priority);
    return transact(r.buf, r.hdr()->nlmsg_len, ("add rule fwmark " + std::to_string(fwmark)).c_str());
}

Status RtNetlink::delete_fwmark_rule(int family, std::uint32_t fwmark, std::uint32_t table, std::uint32_t priority) {
    Request r = rule_request(RTM_DELRULE, 0, family, fwmark, table, priority);
    return transact(r.buf, r.hdr()->nlmsg_len, ("delete rule fwmark " + std::to_string(fwmark)).c_str());
}

Status RtNetlink::delete_route_via(const InterfaceAddress& destination, const RouteNextHop& hop) {
    Request r = route_request(RTM_DELROUTE, 0, hop.ifindex, destination, 0, hop.has_gateway ? hop.gateway : nullptr);
    return transact(r.buf, r.hdr()->nlmsg_len, ("delete route " + destination.to_string()).c_str());
}

}  // namespace espvpn::io
