// Roaming (issue 22): a netlink socket subscribed to the kernel's address, link and
// route changes (RTMGRP_LINK, IPV4/IPV6_IFADDR, IPV4/IPV6_ROUTE), non-blocking, for the
// session loop's poll (never a datapath thread). And the local address the kernel picks
// for a peer now: a connect()ed UDP socket's getsockname (no packet is sent).
#pragma once

#include <cstdint>
#include <string>

#include "protocols/base/result.h"
#include "src/io/unique_fd.h"

namespace espvpn::io {

class RouteWatch {
public:
    // `ignore_ifindex`: changes on this device (the tunnel's own tun) are not reported, nor
    // those of routes in table `ignore_table` (0: none; the captive-portal probe's own table,
    // which espvpn rewrites itself).
    static Result<RouteWatch> open(int ignore_ifindex = 0, std::uint32_t ignore_table = 0);

    int fd() const { return fd_.get(); }
    // Reads every pending message: the number of address/link/route changes among them
    // (an overrun buffer counts as one: something changed).
    unsigned drain();

private:
    RouteWatch(int fd, int ignore, std::uint32_t table) : fd_(fd), ignore_ifindex_(ignore), ignore_table_(table) {}
    UniqueFd fd_;
    int ignore_ifindex_ = 0;
    std::uint32_t ignore_table_ = 0;
};

// The source address the kernel would use for `peer_host` (numeric IPv4/IPv6) now;
// "" when there is no route to it (or the address is not numeric).
std::string local_address_for(const std::string& peer_host);

}  // namespace espvpn::io
