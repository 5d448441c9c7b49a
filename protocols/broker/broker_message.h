// The broker protocol: what the unprivileged session process asks of the privileged
// broker (the tun, routes, DNS, scripts, sockets that need a capability, the state files
// root named) and what it answers, plus the signal events the broker forwards. One
// message per SOCK_SEQPACKET datagram; a descriptor, when one goes with a reply (the tun,
// a UDP or DNS socket), travels beside it as SCM_RIGHTS.
//
// Wire format (big-endian): u16 version (kVersion), u16 type, then the type's fields in
// order: u8 bool/enum, u32 int (two's complement where signed), strings and byte blobs as
// u32 length + bytes, lists as u16 count + items. No byte may follow the last field.
// decode() checks everything the broker relies on: lengths and counts bounded, enums in
// range, addresses parsed (IpPrefix in its canonical text, numeric addresses),
// interface names and paths in their allowed characters. It never throws on bad input:
// an Error says what was wrong. What decodes re-encodes to the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/tunnel/tunnel_config.h"

namespace espvpn::broker {

inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kMaxMessage = 65536;  // the receive buffer of either side
inline constexpr std::size_t kMaxStateBytes = 60000;  // a state file's content in one message

enum class Type : std::uint16_t {
    // session → broker
    bring_up = 1,
    run_script = 2,
    queue_script = 3,
    tear_down = 4,
    add_domain_route = 5,
    remove_domain_route = 6,
    point_dns_at = 7,
    set_mtu = 8,
    open_udp = 9,
    open_dns_listener = 10,
    read_state = 11,
    write_state = 12,
    remove_state = 13,
    open_captive_exception = 14,
    open_probe_socket = 15,
    // broker → session
    reply = 64,
    tun_reply = 65,
    state_reply = 66,
    signal_event = 128,
};
std::string_view type_name(Type t);

// host::ScriptReason, in its order.
enum class ScriptReason : std::uint8_t { pre_init, connect, disconnect, attempt_reconnect, reconnect };

struct LoginServer {  // host::KillSwitchService
    std::string address;  // numeric
    int port = 443;
    bool operator==(const LoginServer&) const = default;
};

struct BringUp {
    TunnelConfig config;
    int mtu = 0;
    std::vector<LoginServer> login_servers;  // --kill-switch: a new login stays possible
};
struct RunScript { ScriptReason reason = ScriptReason::connect; };
struct QueueScript { ScriptReason reason = ScriptReason::reconnect; };
// hold_kill_switch: a captive portal stands before the gateway (docs/SERVICE.md): the tun,
// routes and DNS go, the kill switch stays (the next bring_up replaces it), and one
// open_captive_exception may follow.
struct TearDown { bool hold_kill_switch = false; };
struct AddDomainRoute { IpPrefix address; bool include = true; };
struct RemoveDomainRoute { IpPrefix address; bool include = true; };
struct PointDnsAt { std::string forwarder; };  // numeric address, "" = the VPN's servers again
struct SetMtu { int mtu = 0; };
struct OpenUdp { int family = 0; int send_buffer = 0; int receive_buffer = 0; };  // AF_INET/AF_INET6
struct OpenDnsListener { std::string address; int port = 53; std::string device; };  // device "" = none
struct ReadState { std::string path; };
// Replaces the file (a new file beside it, renamed over it); `mode` (<= 0777) for a new file;
// sync: fsync before the rename (not for --stats-json, rewritten every second).
struct WriteState {
    std::string path;
    std::vector<std::uint8_t> bytes;
    bool sync = true;
    int mode = 0600;
};
struct RemoveState { std::string path; };
// A captive portal's login through the held kill switch: DNS to the network's servers and TCP
// 80/443 to anywhere, for `seconds` (kMinCaptiveSeconds..kMaxCaptiveSeconds); the broker
// closes it on its own timer, or when a tunnel is brought up. Only after a tear_down that
// held the kill switch, once.
inline constexpr int kMinCaptiveSeconds = 1;
inline constexpr int kMaxCaptiveSeconds = 3600;
struct OpenCaptiveException { int seconds = 300; };
// The captive-portal probe's TCP socket, marked for the kill switch and the probe's route
// (host/kill_switch.h kProbeMark); only while the host is up or its kill switch is held.
struct OpenProbeSocket { int family = 0; };  // AF_INET/AF_INET6

// The answer to every request but bring_up. `text`: the error when !ok, else what was done
// (add_domain_route); `count`: the domain routes the host holds now; `data`: read_state's bytes.
struct Reply {
    Type to = Type::tear_down;
    bool ok = true;
    std::string text;
    std::uint32_t count = 0;
    std::vector<std::uint8_t> data;
};
// The answer to bring_up; the tun's descriptor goes with it when ok.
struct TunReply {
    bool ok = true;
    std::string error;
    std::string name;  // interface name
    int ifindex = 0;
    bool vnet_hdr = false;
    std::uint32_t offload_flags = 0;  // TUN_F_*
    bool domain_routes_possible = false;
    int mtu = 0;
};
// The answer to read_state and remove_state: whether a file was there; read: its bytes and
// its owner and mode (a caller may trust only a private file: the cookie cache).
struct StateReply {
    Type to = Type::read_state;
    bool ok = true;
    std::string error;
    bool found = false;
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    std::uint32_t mode = 0;  // permission bits (07777)
    std::vector<std::uint8_t> data;
};
// A signal the broker received (SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 only).
struct SignalEvent { int signo = 0; };

using Message = std::variant<BringUp, RunScript, QueueScript, TearDown, AddDomainRoute, RemoveDomainRoute,
                             PointDnsAt, SetMtu, OpenUdp, OpenDnsListener, ReadState, WriteState, RemoveState,
                             OpenCaptiveException, OpenProbeSocket, Reply, TunReply, StateReply, SignalEvent>;

Type type_of(const Message& m);
std::vector<std::uint8_t> encode(const Message& m);
Result<Message> decode(std::span<const std::uint8_t> bytes);

// Which requests the broker takes when: before the tun exists only bring_up, the pre-init
// script and what needs no tun (sockets, state files); once it is up everything; after
// tear_down nothing that would change the host again (but a new bring_up for --always-on's
// next session); open_captive_exception only after a tear_down that held the kill switch for a
// captive portal, once. An Error names the refused request.
class BrokerState {
public:
    Status admit(Type request) const;
    // Called after the broker has acted on a request (its outcome: ok or not); `held`: a
    // tear_down held the kill switch (a captive portal).
    void after(Type request, bool ok, bool held = false);
    bool up() const { return phase_ == Phase::up; }
    bool captive() const { return captive_; }

private:
    enum class Phase { before_up, up, down } phase_ = Phase::before_up;
    bool captive_ = false;            // down with the kill switch held for a captive portal
    bool exception_opened_ = false;   // ... and its one exception asked for
};

}  // namespace espvpn::broker
