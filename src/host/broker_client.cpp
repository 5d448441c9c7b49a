#include "src/host/broker_client.h"

#include "src/io/seqpacket.h"
#include "src/log/logger.h"

namespace espvpn::host {

BrokerHost::BrokerHost(std::shared_ptr<BrokerChannel> channel, std::vector<KillSwitchService> login_servers)
    : channel_(std::move(channel)), login_servers_(std::move(login_servers)) {}

BrokerHost::~BrokerHost() { tear_down(); }

Result<BrokerChannel::Answer> BrokerChannel::call(const broker::Message& request) {
    std::lock_guard lock(mutex_);
    auto wire = broker::encode(request);
    if (wire.size() > broker::kMaxMessage)
        return make_error("broker request " + std::string(broker::type_name(broker::type_of(request))) + ": too large");
    Status sent = io::send_packet(socket_.get(), wire);
    secure_zero(wire.data(), wire.size());  // state requests carry secrets
    if (!sent) return make_error("broker: " + sent.error().message);
    auto got = io::receive_packet(socket_.get(), broker::kMaxMessage);
    if (!got) return make_error("broker: " + got.error().message);
    if (got->eof) return make_error("broker: the privileged process has gone");
    auto m = broker::decode(got->bytes);
    secure_zero(got->bytes.data(), got->bytes.size());
    if (!m) return m.error();
    return Answer{std::move(*m), std::move(got->fd)};
}

Result<broker::Reply> BrokerChannel::ask(const broker::Message& request, io::UniqueFd* fd) {
    auto a = call(request);
    if (!a) return a.error();
    auto* reply = std::get_if<broker::Reply>(&a->message);
    if (!reply) return make_error("broker: an answer of the wrong type");
    if (!reply->ok) return make_error(reply->text);
    if (fd) {
        if (!a->fd.valid()) return make_error("broker: no descriptor came with the answer");
        *fd = std::move(a->fd);
    }
    return std::move(*reply);
}

Status BrokerHost::bring_up(const TunnelConfig& config, int mtu) {
    broker::BringUp b{config, mtu, {}};
    for (const auto& s : login_servers_) b.login_servers.push_back({s.address, s.port});
    auto a = channel_->call(b);
    if (!a) return a.error();
    auto* t = std::get_if<broker::TunReply>(&a->message);
    if (!t) return make_error("broker: an answer of the wrong type");
    if (!t->ok) return make_error(t->error);
    if (!a->fd.valid()) return make_error("broker: the tun's descriptor did not come");
    io::TunOffloads off;
    off.vnet_hdr = t->vnet_hdr;
    off.flags = t->offload_flags;
    tun_.emplace(io::TunDevice::adopt(a->fd.release(), t->name, t->ifindex, off, [this](unsigned m) -> Status {
        auto r = ask(broker::SetMtu{static_cast<int>(m)});
        if (!r) return r.error();
        return {};
    }));
    mtu_ = t->mtu;
    domain_routes_possible_ = t->domain_routes_possible;
    return {};
}

void BrokerHost::run_script(ScriptReason reason) {
    if (auto r = ask(broker::RunScript{static_cast<broker::ScriptReason>(reason)}); !r)
        LOG_WARN << "script: " << r.error().message;
}

void BrokerHost::queue_script(ScriptReason reason) {
    if (auto r = ask(broker::QueueScript{static_cast<broker::ScriptReason>(reason)}); !r)
        LOG_WARN << "script: " << r.error().message;
}

void BrokerHost::tear_down() {
    if (torn_down_ || !tun_) return;
    torn_down_ = true;
    tun_.reset();  // our descriptor first: the device goes with the broker's
    if (auto r = ask(broker::TearDown{hold_}); !r) LOG_WARN << "tear-down: " << r.error().message;
}

Result<std::string> BrokerHost::add_domain_route(const IpPrefix& address, bool include) {
    auto r = ask(broker::AddDomainRoute{address, include});
    if (!r) return r.error();
    domain_routes_ = r->count;
    return r->text;
}

void BrokerHost::remove_domain_route(const IpPrefix& address, bool include) {
    auto r = ask(broker::RemoveDomainRoute{address, include});
    if (!r) {
        LOG_WARN << "domain route " << address.to_string() << ": " << r.error().message;
        return;
    }
    domain_routes_ = r->count;
}

Status BrokerHost::point_dns_at(const std::string& forwarder) {
    auto r = ask(broker::PointDnsAt{forwarder});
    if (!r) return r.error();
    return {};
}

Result<io::UniqueFd> BrokerHost::open_dns_listener(const std::string& address, int port, const std::string& device) {
    io::UniqueFd fd;
    if (auto r = ask(broker::OpenDnsListener{address, port, device}, &fd); !r) return r.error();
    return fd;
}

Result<io::UniqueFd> BrokerHost::open_probe_socket(int family) { return channel_->open_probe_socket(family); }

Result<io::UniqueFd> BrokerChannel::open_probe_socket(int family) {
    io::UniqueFd fd;
    if (auto r = ask(broker::OpenProbeSocket{family}, &fd); !r) return r.error();
    return fd;
}

Result<io::UniqueFd> BrokerChannel::open_udp(int family, int send_buffer, int receive_buffer) {
    io::UniqueFd fd;
    if (auto r = ask(broker::OpenUdp{family, send_buffer, receive_buffer}, &fd); !r) return r.error();
    return fd;
}

Result<std::string> BrokerChannel::open_captive_exception(int seconds) {
    auto r = ask(broker::OpenCaptiveException{seconds});
    if (!r) return r.error();
    return r->text;
}

Result<std::optional<BrokerChannel::StateFile>> BrokerChannel::read_state(const std::string& path) {
    auto a = call(broker::ReadState{path});
    if (!a) return a.error();
    auto* r = std::get_if<broker::StateReply>(&a->message);
    if (!r) return make_error("broker: an answer of the wrong type");
    if (!r->ok) return make_error(r->error);
    if (!r->found) return std::optional<StateFile>{};
    return std::optional<StateFile>(StateFile{std::move(r->data), r->uid, r->gid, r->mode});
}

Status BrokerChannel::write_state(const std::string& path, std::vector<std::uint8_t> bytes, bool sync, int mode) {
    broker::WriteState w{path, std::move(bytes), sync, mode};
    auto r = ask(w);
    secure_zero(w.bytes.data(), w.bytes.size());  // a token or a cookie
    if (!r) return r.error();
    return {};
}

Result<bool> BrokerChannel::remove_state(const std::string& path) {
    auto a = call(broker::RemoveState{path});
    if (!a) return a.error();
    auto* r = std::get_if<broker::StateReply>(&a->message);
    if (!r) return make_error("broker: an answer of the wrong type");
    if (!r->ok) return make_error(r->error);
    return r->found;
}

namespace {
// The session's own attempt failed and the broker's too: both reasons.
Error both_failed(const Error& local, const Error& broker) {
    return make_error(local.message + " (and through the privileged process: " + broker.message + ")");
}
}  // namespace

Result<std::optional<io::StateFile>> BrokerStateFiles::read(const std::string& path) {
    auto own = local_.read(path);
    if (own) return own;
    auto r = channel_->read_state(path);
    if (!r) return both_failed(own.error(), r.error());
    if (!*r) return std::optional<io::StateFile>{};
    auto& got = **r;
    io::StateFile f{Secret(got.bytes), static_cast<uid_t>(got.uid), static_cast<gid_t>(got.gid),
                    static_cast<mode_t>(got.mode)};
    secure_zero(got.bytes.data(), got.bytes.size());
    return std::optional<io::StateFile>(std::move(f));
}

Status BrokerStateFiles::write(const std::string& path, std::string_view bytes, io::Sync sync, mode_t new_mode) {
    auto own = local_.write(path, bytes, sync, new_mode);
    if (own) return own;
    std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());
    Status done = channel_->write_state(path, std::move(copy), sync == io::Sync::yes, static_cast<int>(new_mode & 0777));
    if (!done) return both_failed(own.error(), done.error());
    return {};
}

Result<bool> BrokerStateFiles::remove(const std::string& path) {
    auto own = local_.remove(path);
    if (own) return own;
    auto r = channel_->remove_state(path);
    if (!r) return both_failed(own.error(), r.error());
    return r;
}

}  // namespace espvpn::host
