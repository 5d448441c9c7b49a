#include "src/datapath/dtls/dtls_datapath.h"

#include "src/datapath/dtls/dtls_pipeline.h"

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
    if (auto st = check_batch_sizes("DTLS datapath", options.tx_batch, options.rx_batch); !st) return st.error();
    std::unique_ptr<DtlsDatapath> dp(new DtlsDatapath());
    PipelinePair<DtlsTxPipeline, DtlsRxPipeline>& p = dp->pipes_;
    Status started = p.start("DTLS datapath", "dtls-tx", "dtls-rx", [&] {
        p.tx = std::make_unique<DtlsTxPipeline>(tun, udp, channel, options);
        p.rx = std::make_unique<DtlsRxPipeline>(udp, channel, options, *p.tx);
    });
    if (!started) return started.error();
    return dp;
}

DtlsDatapath::~DtlsDatapath() { stop(); }

void DtlsDatapath::stop() { pipes_.stop(); }

Status DtlsDatapath::send(io::PacketBatch& batch) {
    if (pipes_.stopped) return make_error("DTLS datapath: stopped");
    return pipes_.tx->send_packets(batch);
}

void DtlsDatapath::send_dpd_request() { pipes_.ask_tx(pipes_.tx->dpd_requests); }

void DtlsDatapath::send_keepalive() { pipes_.ask_tx(pipes_.tx->keepalives); }

DtlsDatapathStats DtlsDatapath::stats() const {
    return pipes_.snapshot<DtlsDatapathStats>();
}

DtlsLiveness DtlsDatapath::liveness() const {
    DtlsLiveness l;
    l.last_rx = pipes_.rx->last_rx.get();
    l.last_dpd_response = pipes_.rx->last_dpd_response.get();
    l.peer_disconnected = pipes_.rx->peer_disconnected.load(std::memory_order_relaxed);
    l.peer_closed = pipes_.rx->peer_closed.load(std::memory_order_relaxed);
    return l;
}

std::optional<std::string> DtlsDatapath::failure() const { return pipes_.failure(); }

}  // namespace espvpn::datapath
