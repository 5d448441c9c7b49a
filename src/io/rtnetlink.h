// A small rtnetlink client: the few link/address/route changes a VPN client
// makes to its tun device (no libnl). Each request waits for the kernel's ACK.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "crypto/result.h"

namespace espvpn::io {

// An interface address with its prefix length, host bits kept: "10.0.0.2/24",
// "fd00::2/64" (no length: /32, /128). As a route destination its host bits
// are cleared when sent. (session's IpPrefix is a network: host bits cleared.)
struct InterfaceAddress {
    int family = 0;  // AF_INET or AF_INET6
    std::uint8_t address[16] = {};
    std::uint8_t prefix_len = 0;

    static Result<InterfaceAddress> parse(std::string_view text);
    std::string to_string() const;
    bool operator==(const InterfaceAddress& other) const;
};

class RtNetlink {
public:
    static Result<RtNetlink> open();
    RtNetlink(RtNetlink&& other) noexcept;
    RtNetlink& operator=(RtNetlink&& other) noexcept;
    ~RtNetlink();

    Status set_mtu(int ifindex, unsigned mtu);
    Status set_up(int ifindex, bool up);
    Status add_address(int ifindex, const InterfaceAddress& prefix);
    Status delete_address(int ifindex, const InterfaceAddress& prefix);
    // A route to `destination` through the interface (no gateway: tun is point-to-point).
    Status add_route(int ifindex, const InterfaceAddress& destination, unsigned metric = 0);
    Status delete_route(int ifindex, const InterfaceAddress& destination, unsigned metric = 0);

private:
    explicit RtNetlink(int fd) : fd_(fd) {}
    Status transact(void* request, std::size_t length, const char* what);
    int fd_ = -1;
    std::uint32_t seq_ = 1;
};

}  // namespace espvpn::io
