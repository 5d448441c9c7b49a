#include "src/datapath/datapath.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cerrno>

#include "src/datapath/pipeline.h"

namespace espvpn::datapath {

void wait_for_send_room(const io::UdpSocket& udp, ControlChannel& control, io::SendStatus why) {
    constexpr int kSocketFullWaitMs = 20;  // POLLOUT wait when the send buffer is full
    constexpr int kNoBuffersWaitMs = 1;    // ENOBUFS gives no POLLOUT edge: just pause
    pollfd fds[2] = {{udp.fd(), POLLOUT, 0}, {control.fd(), POLLIN, 0}};
    if (why == io::SendStatus::no_buffers) {
        (void)::poll(&fds[1], 1, kNoBuffersWaitMs);
    } else {
        (void)::poll(fds, 2, kSocketFullWaitMs);
    }
}

Result<ProbeTarget> ProbeTarget::parse(std::string_view tunnel_address, std::string_view gw_address) {
    ProbeTarget t;
    const std::string src(tunnel_address), dst(gw_address);
    if (::inet_pton(AF_INET, src.c_str(), t.source) == 1 && ::inet_pton(AF_INET, dst.c_str(), t.gateway) == 1) {
        t.address_size = 4;
    } else if (::inet_pton(AF_INET6, src.c_str(), t.source) == 1 &&
               ::inet_pton(AF_INET6, dst.c_str(), t.gateway) == 1) {
        t.address_size = 16;
    } else {
        return make_error("probe addresses '" + src + "' -> '" + dst +
                          "' are not both numeric IPv4 or both numeric IPv6");
    }
    return t;
}

Datapath::Datapath() = default;

Result<std::unique_ptr<Datapath>> Datapath::start(io::TunDevice& tun, io::UdpSocket& udp,
                                                  const DatapathOptions& options, InitialSas sas) {
    if (options.max_inner_size < 576 || options.max_inner_size > 65535)
        return make_error("datapath: max inner packet size " + std::to_string(options.max_inner_size) +
                          " is outside 576..65535");
    if (options.tx_batch == 0 || options.rx_batch == 0 || options.tx_batch > io::UdpSocket::kMaxBatch ||
        options.rx_batch > io::UdpSocket::kMaxBatch)
        return make_error("datapath: batch sizes must be 1.." + std::to_string(io::UdpSocket::kMaxBatch));
    std::unique_ptr<Datapath> dp(new Datapath());
    try {
        dp->rx_to_tx_ = std::make_unique<RxToTx>();
        dp->tx_ = std::make_unique<TxPipeline>(tun, udp, options, *dp->rx_to_tx_);
        dp->rx_ = std::make_unique<RxPipeline>(tun, udp, options, *dp->rx_to_tx_);
        // Queued before the threads exist: each takes them in its first handle_control().
        if (sas.outbound) {
            (void)dp->tx_->sa_updates.post(
                std::make_unique<OutboundUpdate>(OutboundUpdate{std::move(*sas.outbound), std::nullopt}));
            dp->tx_->control.notify();
        }
        if (sas.inbound) {
            (void)dp->rx_->sa_updates.post(std::make_unique<EspInboundSa>(std::move(*sas.inbound)));
            dp->rx_->control.notify();
        }
        dp->threads_.start("esp-tx", dp->tx_->control, [p = dp->tx_.get()] { p->run(); },
                           "esp-rx", dp->rx_->control, [p = dp->rx_.get()] { p->run(); });
    } catch (const std::exception& e) {
        dp->stop();
        return make_error(std::string("datapath: cannot start: ") + e.what());
    }
    return dp;
}

Datapath::~Datapath() { stop(); }

void Datapath::stop() {
    if (stopped_) return;
    stopped_ = true;
    threads_.stop();
}

bool Datapath::install_outbound(EspOutboundSa sa) {
    if (stopped_) return false;
    if (!tx_->sa_updates.post(std::make_unique<OutboundUpdate>(OutboundUpdate{std::move(sa), std::nullopt})))
        return false;
    tx_->control.notify();
    return true;
}

bool Datapath::install_outbound_when_peer_uses(EspOutboundSa sa, std::uint32_t peer_spi) {
    if (stopped_) return false;
    if (!tx_->sa_updates.post(std::make_unique<OutboundUpdate>(OutboundUpdate{std::move(sa), peer_spi})))
        return false;
    tx_->control.notify();
    return true;
}

bool Datapath::install_inbound(EspInboundSa sa) {
    if (stopped_) return false;
    if (!rx_->sa_updates.post(std::make_unique<EspInboundSa>(std::move(sa)))) return false;
    rx_->control.notify();
    return true;
}

void Datapath::send_probe() {
    if (stopped_) return;
    tx_->probe_requests.fetch_add(1, std::memory_order_release);
    tx_->control.notify();
}

DatapathStats Datapath::stats() const {
    DatapathStats s;
    s.tx = tx_->counters.snapshot();
    s.rx = rx_->counters.snapshot();
    return s;
}

Liveness Datapath::liveness() const {
    using D = Clock::duration;
    Liveness l;
    l.last_rx = Clock::time_point(D(rx_->last_rx.load(std::memory_order_relaxed)));
    l.last_probe_reply = Clock::time_point(D(rx_->last_probe_reply.load(std::memory_order_relaxed)));
    return l;
}

std::optional<std::string> Datapath::failure() const {
    if (auto f = tx_->failure.get()) return "tx: " + *f;
    if (auto f = rx_->failure.get()) return "rx: " + *f;
    return std::nullopt;
}

}  // namespace espvpn::datapath
