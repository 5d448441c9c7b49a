// What NetworkManager needs to configure a VPN connection (the values behind the
// SetConfig / SetIp4Config / SetIp6Config calls), computed from the vpnc-script
// environment espvpn hands to its --script. Pure: no D-Bus, no GLib, no I/O, so every
// case of the mapping is unit-tested (docs/protocols/vpnc-script-and-networkmanager.md §B.4).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn::nm {

// The script's environment, name -> value.
using ScriptEnvironment = std::map<std::string, std::string>;

using Ip4Address = std::array<std::uint8_t, 4>;   // network byte order
using Ip6Address = std::array<std::uint8_t, 16>;  // network byte order

struct Ip4Route {
    Ip4Address network{};
    std::uint32_t prefix = 32;
    bool operator==(const Ip4Route&) const = default;
};

struct Ip6Route {
    Ip6Address network{};
    std::uint32_t prefix = 128;
    bool operator==(const Ip6Route&) const = default;
};

// SetConfig: the generic part.
struct NmGenericConfig {
    std::variant<Ip4Address, Ip6Address> gateway;  // the outer VPN server address
    std::string tundev;
    std::optional<std::uint32_t> mtu;
    std::string banner;     // UTF-8 (Latin-1 input re-encoded); empty = none
    std::string proxy_pac;  // empty = none
    bool has_ip4 = false;
    bool has_ip6 = false;
};

// SetIp4Config.
struct NmIp4Config {
    Ip4Address address{};
    std::uint32_t prefix = 32;
    std::vector<Ip4Address> dns;
    std::vector<Ip4Address> nbns;
    std::vector<std::string> domains;
    std::vector<Ip4Route> routes;  // split includes; empty = everything (default route)
    bool never_default = false;
};

// SetIp6Config.
struct NmIp6Config {
    Ip6Address address{};
    std::uint32_t prefix = 128;
    std::vector<Ip6Address> dns;
    std::string domain;
    std::vector<Ip6Route> routes;
    bool never_default = false;
};

struct NmVpnConfig {
    NmGenericConfig generic;
    std::optional<NmIp4Config> ip4;
    std::optional<NmIp6Config> ip6;
};

// Why a configuration cannot be reported. `reason` is the short label passed to
// SetFailure (the same labels NetworkManager-openconnect's helper uses).
struct NmConfigError {
    std::string reason;   // "VPN Gateway", "Tunnel Device", "IP4 Address", "IP6 Address", ...
    std::string message;  // what exactly was wrong, for the log
};

// Split-include routes become NM routes with never-default; a 0.0.0.0/0 (::/0)
// include means "full tunnel": no route, default route allowed. Split excludes
// cannot be expressed in NM's VPN API and are ignored (as NM-openconnect does).
std::variant<NmVpnConfig, NmConfigError> nm_config_from_script_env(const ScriptEnvironment& env);

// Re-encodes text that is not valid UTF-8 as if it were ISO-8859-1 (what servers
// send banners in), so it can always go into a D-Bus string.
std::string utf8_from_utf8_or_latin1(const std::string& text);

}  // namespace espvpn::nm
