#include "src/datapath/dtls_datapath.h"


#include "src/datapath/dtls_pipeline.h"

namespace espvpn::datapath {

std::uint64_t DtlsDatapathStats::drops() const { return drops_of(tx) + drops_of(rx); }

void DtlsDatapathStats::add(const DtlsDatapathStats& other) {
    tx.add(other.tx);
    rx.add(other.rx);
}

std::string DtlsDatapathStats::to_json() const {
    std::string o = "{\"tx\": {";
    append_json_members(o, tx);
    o += "}, \"rx\": {";
    append_json_members(o, rx);
    return o + "}}";
}

DtlsDatapath::DtlsDatapath() = default;

Result<std::unique_ptr<DtlsDatapath>> DtlsDatapath::start(io::TunDevice* tun, io::UdpSocket& udp,
                                                          io::DtlsChannel& channel,
                                                          const DtlsDatapathOptions& options) {
    if (!channel.established()) return make_error("DTLS datapath: the DTLS handshake has not completed");
    if (!options.deliver) return make_error("DTLS datapath: no deliver function for received packets");
    if (channel.tunnel_mtu() < 576)
        return make_error("DTLS datapath: tunnel MTU " + std::to_string(channel.tunnel_mtu()) + " is below 576");
    if (options.tx_batch == 0 || options.rx_batch == 0 || options.tx_batch > io::UdpSocket::kMaxBatch ||
        options.rx_batch > io::UdpSocket::kMaxBatch)
        return make_error("DTLS datapath: batch sizes must be 1.." + std::to_string(io::UdpSocket::kMaxBatch));
    std::unique_ptr<DtlsDatapath> dp(new DtlsDatapath());
    try {
        dp->tx_ = std::make_unique<DtlsTxPipeline>(tun, udp, channel, options);
        dp->rx_ = std::make_unique<DtlsRxPipeline>(udp, channel, options, *dp->tx_);
        dp->threads_.start("dtls-tx", dp->tx_->control, [p = dp->tx_.get()] { p->run(); },
                           "dtls-rx", dp->rx_->control, [p = dp->rx_.get()] { p->run(); });
    } catch (const std::exception& e) {
        dp->stop();
        return make_error(std::string("DTLS datapath: cannot start: ") + e.what());
    }
    return dp;
}

DtlsDatapath::~DtlsDatapath() { stop(); }

void DtlsDatapath::stop() {
    if (stopped_) return;
    stopped_ = true;
    threads_.stop();
}

Status DtlsDatapath::send(io::PacketBatch& batch) {
    if (stopped_) return make_error("DTLS datapath: stopped");
    return tx_->send_packets(batch);
}

void DtlsDatapath::send_dpd_request() {
    if (stopped_) return;
    tx_->dpd_requests.fetch_add(1, std::memory_order_release);
    tx_->control.notify();
}

void DtlsDatapath::send_keepalive() {
    if (stopped_) return;
    tx_->keepalives.fetch_add(1, std::memory_order_release);
    tx_->control.notify();
}

DtlsDatapathStats DtlsDatapath::stats() const {
    DtlsDatapathStats s;
    s.tx = tx_->counters.snapshot();
    s.rx = rx_->counters.snapshot();
    return s;
}

DtlsLiveness DtlsDatapath::liveness() const {
    using D = Clock::duration;
    DtlsLiveness l;
    l.last_rx = Clock::time_point(D(rx_->last_rx.load(std::memory_order_relaxed)));
    l.last_dpd_response = Clock::time_point(D(rx_->last_dpd_response.load(std::memory_order_relaxed)));
    l.peer_disconnected = rx_->peer_disconnected.load(std::memory_order_relaxed);
    l.peer_closed = rx_->peer_closed.load(std::memory_order_relaxed);
    return l;
}

std::optional<std::string> DtlsDatapath::failure() const {
    if (auto f = tx_->failure.get()) return "tx: " + *f;
    if (auto f = rx_->failure.get()) return "rx: " + *f;
    return std::nullopt;
}

}  // namespace espvpn::datapath
