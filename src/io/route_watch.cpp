#include "src/io/route_watch.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/io/udp_socket.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

Result<RouteWatch> RouteWatch::open(int ignore_ifindex, std::uint32_t ignore_table) {
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    if (fd < 0) return make_error(std::string("route watch: netlink socket: ") + std::strerror(errno));
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        const int e = errno;
        ::close(fd);
        return make_error(std::string("route watch: netlink bind: ") + std::strerror(e));
    }
    return RouteWatch(fd, ignore_ifindex, ignore_table);
}

namespace {

// The device a change concerns (0: unknown).
int message_ifindex(const nlmsghdr& h) {
    switch (h.nlmsg_type) {
        case RTM_NEWLINK:
        case RTM_DELLINK:
            if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(ifinfomsg)))
                return static_cast<const ifinfomsg*>(NLMSG_DATA(&h))->ifi_index;
            return 0;
        case RTM_NEWADDR:
        case RTM_DELADDR:
            if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(ifaddrmsg)))
                return static_cast<int>(static_cast<const ifaddrmsg*>(NLMSG_DATA(&h))->ifa_index);
            return 0;
        case RTM_NEWROUTE:
        case RTM_DELROUTE: {
            if (h.nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return 0;
            const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(&h));
            int len = static_cast<int>(RTM_PAYLOAD(&h));
            for (const rtattr* a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int)) {
                    int oif;
                    std::memcpy(&oif, RTA_DATA(a), sizeof oif);
                    return oif;
                }
            }
            return 0;
        }
        default: return 0;
    }
}

// The routing table a route change concerns (0: not a route).
std::uint32_t message_table(const nlmsghdr& h) {
    if ((h.nlmsg_type != RTM_NEWROUTE && h.nlmsg_type != RTM_DELROUTE) || h.nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg)))
        return 0;
    const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(&h));
    std::uint32_t table = rt->rtm_table;
    int len = static_cast<int>(RTM_PAYLOAD(&h));
    for (const rtattr* a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == RTA_TABLE && RTA_PAYLOAD(a) >= sizeof table) std::memcpy(&table, RTA_DATA(a), sizeof table);
    return table;
}

bool is_change(std::uint16_t type) {
    switch (type) {
        case RTM_NEWLINK: case RTM_DELLINK: case RTM_NEWADDR: case RTM_DELADDR:
        case RTM_NEWROUTE: case RTM_DELROUTE: return true;
        default: return false;
    }
}

}  // namespace

unsigned RouteWatch::drain() {
    unsigned changes = 0;
    alignas(nlmsghdr) char buf[16384];
    // Bounded: the socket is non-blocking and each read takes what the kernel queued.
    for (int reads = 0; reads < 256; ++reads) {
        const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == ENOBUFS) {  // messages were lost: something changed
                ++changes;
                continue;
            }
            break;  // EAGAIN: all read
        }
        int len = static_cast<int>(n);
        for (const auto* h = reinterpret_cast<const nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
            if (!is_change(h->nlmsg_type)) continue;
            const int ifindex = message_ifindex(*h);
            if (ignore_ifindex_ != 0 && ifindex == ignore_ifindex_) continue;
            if (ignore_table_ != 0 && message_table(*h) == ignore_table_) continue;
            ++changes;
        }
    }
    return changes;
}

std::string local_address_for(const std::string& peer_host) {
    auto peer = SocketAddress::parse(endpoint_text(peer_host, 9));
    if (!peer) return {};
    UniqueFd fd(::socket(peer->family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    // connect() on UDP only looks the route up and fixes the source address.
    if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&peer->storage), peer->length) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0)
        return {};
    return numeric_host(reinterpret_cast<const sockaddr*>(&local));
}

}  // namespace espvpn::io
