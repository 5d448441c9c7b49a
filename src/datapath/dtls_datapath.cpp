#include "src/datapath/dtls_datapath.h"

#include <sstream>
#include <string_view>

#include "src/datapath/dtls_pipeline.h"

namespace espvpn::datapath {

DtlsTxStats DtlsTxCounters::snapshot() const {
    DtlsTxStats s;
#define ESPVPN_FIELD(name) s.name = name.load(std::memory_order_relaxed);
    ESPVPN_DTLS_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    return s;
}

DtlsRxStats DtlsRxCounters::snapshot() const {
    DtlsRxStats s;
#define ESPVPN_FIELD(name) s.name = name.load(std::memory_order_relaxed);
    ESPVPN_DTLS_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    return s;
}

std::uint64_t DtlsDatapathStats::drops() const {
    std::uint64_t n = 0;
    auto add = [&](std::string_view name, std::uint64_t v) {
        if (name.substr(0, 5) == "drop_") n += v;
    };
#define ESPVPN_FIELD(name) add(#name, tx.name);
    ESPVPN_DTLS_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
#define ESPVPN_FIELD(name) add(#name, rx.name);
    ESPVPN_DTLS_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    return n;
}

void DtlsDatapathStats::add(const DtlsDatapathStats& other) {
#define ESPVPN_FIELD(name) tx.name += other.tx.name;
    ESPVPN_DTLS_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
#define ESPVPN_FIELD(name) rx.name += other.rx.name;
    ESPVPN_DTLS_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
}

std::string DtlsDatapathStats::to_json() const {
    std::ostringstream o;
    const char* sep = "";
    o << "{\"tx\": {";
#define ESPVPN_FIELD(name) o << sep << "\"" #name "\": " << tx.name, sep = ", ";
    ESPVPN_DTLS_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    o << "}, \"rx\": {";
    sep = "";
#define ESPVPN_FIELD(name) o << sep << "\"" #name "\": " << rx.name, sep = ", ";
    ESPVPN_DTLS_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    o << "}}";
    return o.str();
}

DtlsDatapath::DtlsDatapath() = default;

Result<std::unique_ptr<DtlsDatapath>> DtlsDatapath::start(io::TunDevice* tun, io::UdpSocket& udp,
                                                          io::DtlsChannel& channel,
                                                          const DtlsDatapathOptions& options) {
    if (!channel.established()) return make_error("DTLS datapath: the DTLS handshake has not completed");
    if (!tun && (options.read_tun || !options.deliver))
        return make_error("DTLS datapath: without a tun, use session mode with a deliver function");
    if (channel.tunnel_mtu() < 576)
        return make_error("DTLS datapath: tunnel MTU " + std::to_string(channel.tunnel_mtu()) + " is below 576");
    if (options.tx_batch == 0 || options.rx_batch == 0 || options.tx_batch > io::UdpSocket::kMaxBatch ||
        options.rx_batch > io::UdpSocket::kMaxBatch)
        return make_error("DTLS datapath: batch sizes must be 1.." + std::to_string(io::UdpSocket::kMaxBatch));
    std::unique_ptr<DtlsDatapath> dp(new DtlsDatapath());
    try {
        dp->tx_ = std::make_unique<DtlsTxPipeline>(tun, udp, channel, options);
        dp->rx_ = std::make_unique<DtlsRxPipeline>(tun, udp, channel, options, *dp->tx_);
        dp->threads_.start(dp->tx_->control, [p = dp->tx_.get()] { p->run(); },
                           dp->rx_->control, [p = dp->rx_.get()] { p->run(); });
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
