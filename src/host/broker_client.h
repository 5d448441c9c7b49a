// BrokerHost: the host side of the session process: each Host call is a request to the
// privileged broker (broker.h) over the request socket, answered before it returns. The
// tun, the ESP/DTLS UDP sockets and the DNS forwarder's socket come back as descriptors;
// the session then uses them directly (the packets never pass the broker).
// Thread-safe: one request at a time (the control thread; the DTLS thread's set_mtu).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/secret.h"
#include "protocols/broker/broker_message.h"
#include "src/host/host.h"
#include "src/host/kill_switch.h"
#include "src/io/owned_file.h"
#include "src/io/state_files.h"

namespace espvpn::host {

// The session's end of the request socket: one request and its answer at a time.
class BrokerChannel {
public:
    explicit BrokerChannel(io::UniqueFd socket) : socket_(std::move(socket)) {}
    struct Answer {
        broker::Message message;
        io::UniqueFd fd;
    };
    Result<Answer> call(const broker::Message& request);
    // A request answered by a Reply; its error as an Error; `fd`: the descriptor that must come with it.
    Result<broker::Reply> ask(const broker::Message& request, io::UniqueFd* fd = nullptr);

    // A UDP socket with forced buffers (io::UdpOptions::make_socket).
    Result<io::UniqueFd> open_udp(int family, int send_buffer, int receive_buffer);
    // The files root named before the split (the broker honours only those: BrokerOptions).
    // read: nullopt when nothing is there, else the bytes, owner and mode; remove: whether
    // something was removed. The broker opens them O_NOFOLLOW and replaces by rename.
    struct StateFile {
        std::vector<std::uint8_t> bytes;
        std::uint32_t uid = 0, gid = 0, mode = 0;
    };
    Result<std::optional<StateFile>> read_state(const std::string& path);
    Status write_state(const std::string& path, std::vector<std::uint8_t> bytes, bool sync, int mode);
    Result<bool> remove_state(const std::string& path);
    // After a tear-down that held the kill switch (a captive portal): the time-limited exception
    // for the portal's login (broker::OpenCaptiveException); what it opened, for the log.
    Result<std::string> open_captive_exception(int seconds);
    // The captive-portal probe's marked socket (broker::OpenProbeSocket).
    Result<io::UniqueFd> open_probe_socket(int family);

private:
    io::UniqueFd socket_;
    std::mutex mutex_;
};

// The session process's state files (the HOTP token, the portal cookie cache, --stats-json):
// each is read, written or removed by the session itself first (io::LocalStateFiles: its
// own files, e.g. a sudo invoker's cookie cache); when that fails (root's files, a root-only
// directory), by the broker, which honours only the files root named before the split
// (BrokerOptions) and does it with io::LocalStateFiles' rules.
class BrokerStateFiles final : public io::StateFiles {
public:
    explicit BrokerStateFiles(std::shared_ptr<BrokerChannel> channel) : channel_(std::move(channel)) {}
    Result<std::optional<io::StateFile>> read(const std::string& path) override;
    Status write(const std::string& path, std::string_view bytes, io::Sync sync, mode_t new_mode) override;
    Result<bool> remove(const std::string& path) override;

private:
    std::shared_ptr<BrokerChannel> channel_;
    io::LocalStateFiles local_;
};

class BrokerHost final : public Host {
public:
    // `login_servers`: --kill-switch's portal addresses.
    BrokerHost(std::shared_ptr<BrokerChannel> channel, std::vector<KillSwitchService> login_servers);
    ~BrokerHost() override;

    Status bring_up(const TunnelConfig& config, int mtu) override;
    void run_script(ScriptReason reason) override;
    void queue_script(ScriptReason reason) override;
    void tear_down() override;
    bool hold_kill_switch() override {
        hold_ = true;
        return true;
    }
    Result<std::string> add_domain_route(const IpPrefix& address, bool include) override;
    void remove_domain_route(const IpPrefix& address, bool include) override;
    Status point_dns_at(const std::string& forwarder) override;
    bool domain_routes_possible() const override { return domain_routes_possible_; }
    std::size_t domain_route_count() const override { return domain_routes_; }
    Result<io::UniqueFd> open_dns_listener(const std::string& address, int port, const std::string& device) override;
    Result<io::UniqueFd> open_probe_socket(int family) override;
    io::TunDevice& tun() override { return *tun_; }
    int mtu() const override { return mtu_; }

private:
    Result<broker::Reply> ask(const broker::Message& request, io::UniqueFd* fd = nullptr) {
        return channel_->ask(request, fd);
    }

    std::shared_ptr<BrokerChannel> channel_;
    std::vector<KillSwitchService> login_servers_;
    std::optional<io::TunDevice> tun_;
    int mtu_ = 0;
    bool domain_routes_possible_ = false;
    std::size_t domain_routes_ = 0;
    bool torn_down_ = false;
    bool hold_ = false;  // hold_kill_switch: the tear-down keeps the kill switch
};

}  // namespace espvpn::host
