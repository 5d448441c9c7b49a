// A small rtnetlink client: the few link/address/route changes a VPN client
// makes to its tun device (no libnl). Each request waits for the kernel's ACK.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "src/io/unique_fd.h"

struct nlmsghdr;

namespace espvpn::io {

// An interface address with its prefix length, host bits kept: "10.0.0.2/24",
// "fd00::2/64" (no length: /32, /128), parsed by protocols/tunnel's one prefix
// grammar (parse_address_length). As a route destination its host bits are
// cleared when sent. (protocols/tunnel IpPrefix is a network: host bits cleared.)
struct InterfaceAddress {
    int family = 0;  // AF_INET or AF_INET6
    std::uint8_t address[16] = {};
    std::uint8_t prefix_len = 0;

    static Result<InterfaceAddress> parse(std::string_view text);
    std::string to_string() const;
    bool operator==(const InterfaceAddress& other) const;
};

// Where the kernel sends packets for a destination now: a next hop (or none: on-link) and a device.
struct RouteNextHop {
    int family = 0;                  // of the gateway and of the destinations it serves
    bool has_gateway = false;
    std::uint8_t gateway[16] = {};
    int ifindex = 0;
    std::string gateway_text() const;  // "" when on-link
};

class RtNetlink {
public:
    static Result<RtNetlink> open();

    Status set_mtu(int ifindex, unsigned mtu);
    // The device's transmit queue (txqueuelen), in packets.
    Status set_tx_queue_len(int ifindex, unsigned packets);
    Status set_up(int ifindex, bool up);
    Status add_address(int ifindex, const InterfaceAddress& prefix);
    Status delete_address(int ifindex, const InterfaceAddress& prefix);
    // A route to `destination` through the interface (no gateway: tun is point-to-point).
    Status add_route(int ifindex, const InterfaceAddress& destination, unsigned metric = 0);
    Status delete_route(int ifindex, const InterfaceAddress& destination, unsigned metric = 0);
    // RTM_GETROUTE for one address: the unicast path to it, or nullopt when it is
    // local, unreachable or otherwise not a unicast route (the reason in `why`).
    Result<std::optional<RouteNextHop>> get_route(const InterfaceAddress& address, std::string* why = nullptr);
    // A route to `destination` via `hop` in the main table. Never replaces an
    // existing route: fails with `exists` set when the same one is already there.
    Status add_route_via(const InterfaceAddress& destination, const RouteNextHop& hop, bool* exists = nullptr);
    Status delete_route_via(const InterfaceAddress& destination, const RouteNextHop& hop);
    // The same in routing table `table` (replacing what is there for `destination`).
    Status replace_route_in(std::uint32_t table, const InterfaceAddress& destination, const RouteNextHop& hop);
    Status delete_route_in(std::uint32_t table, const InterfaceAddress& destination, const RouteNextHop& hop);
    // The main table's unicast default routes (0/0) of `family` that do not use the device
    // `skip_ifindex` (the tun), lowest metric first.
    Result<std::vector<RouteNextHop>> default_routes(int family, int skip_ifindex);
    // A policy rule: packets of `family` marked `fwmark` look up `table`, at `priority`.
    Status add_fwmark_rule(int family, std::uint32_t fwmark, std::uint32_t table, std::uint32_t priority);
    Status delete_fwmark_rule(int family, std::uint32_t fwmark, std::uint32_t table, std::uint32_t priority);

private:
    explicit RtNetlink(int fd) : fd_(fd) {}
    // Numbers the request (seq_) and sends it to the kernel.
    Status send_request(void* request, std::size_t length, const char* what);
    // Sends a request and waits for its ACK; `on_reply` (if any) sees the other replies to it.
    Status transact(void* request, std::size_t length, const char* what,
                    const std::function<void(const nlmsghdr&)>& on_reply = {}, int* error = nullptr);
    // A dump request: every reply to `on_reply` until NLMSG_DONE.
    Status dump(void* request, std::size_t length, const char* what, const std::function<void(const nlmsghdr&)>& on_reply);
    // RTM_NEWLINK setting one u32 link attribute (IFLA_MTU, IFLA_TXQLEN).
    Status set_link_u32(int ifindex, std::uint16_t attr, std::uint32_t value, const std::string& what);
    UniqueFd fd_;
    std::uint32_t seq_ = 1;
};

}  // namespace espvpn::io
