#include "src/datapath/esp/esp_datapath.h"

#include <arpa/inet.h>

#include <cerrno>

#include "src/datapath/esp/esp_pipeline.h"

namespace espvpn::datapath {

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

EspDatapath::EspDatapath() = default;

Result<std::unique_ptr<EspDatapath>> EspDatapath::start(io::TunDevice& tun, io::UdpSocket& udp,
                                                  const EspDatapathOptions& options, EspInitialSas sas) {
    if (options.max_inner_size < 576 || options.max_inner_size > 65535)
        return make_error("datapath: max inner packet size " + std::to_string(options.max_inner_size) +
                          " is outside 576..65535");
    if (auto st = check_batch_sizes("datapath", options.tx_batch, options.rx_batch); !st) return st.error();
    std::unique_ptr<EspDatapath> dp(new EspDatapath());
    PipelinePair<EspTxPipeline, EspRxPipeline>& p = dp->pipes_;
    Status started = p.start("datapath", "esp-tx", "esp-rx", [&] {
        dp->rx_to_tx_ = std::make_unique<EspRxToTx>();
        p.tx = std::make_unique<EspTxPipeline>(tun, udp, options, *dp->rx_to_tx_);
        p.rx = std::make_unique<EspRxPipeline>(tun, udp, options, *dp->rx_to_tx_);
        // Queued before the threads exist: each takes them in its first handle_control().
        if (sas.outbound) {
            (void)p.tx->sa_updates.post(
                std::make_unique<OutboundUpdate>(OutboundUpdate{std::move(*sas.outbound), std::nullopt}));
            p.tx->control.notify();
        }
        if (sas.inbound) {
            (void)p.rx->sa_updates.post(std::make_unique<EspInboundSa>(std::move(*sas.inbound)));
            p.rx->control.notify();
        }
    });
    if (!started) return started.error();
    return dp;
}

EspDatapath::~EspDatapath() { stop(); }

void EspDatapath::stop() { pipes_.stop(); }

bool EspDatapath::install_outbound(EspOutboundSa sa) { return install_outbound_after(std::move(sa), std::nullopt); }

bool EspDatapath::install_outbound_when_peer_uses(EspOutboundSa sa, std::uint32_t peer_spi) {
    return install_outbound_after(std::move(sa), peer_spi);
}

bool EspDatapath::install_outbound_after(EspOutboundSa sa, std::optional<std::uint32_t> peer_spi) {
    if (pipes_.stopped) return false;
    if (!pipes_.tx->sa_updates.post(std::make_unique<OutboundUpdate>(OutboundUpdate{std::move(sa), peer_spi})))
        return false;
    pipes_.tx->control.notify();
    return true;
}

bool EspDatapath::install_inbound(EspInboundSa sa) {
    if (pipes_.stopped) return false;
    if (!pipes_.rx->sa_updates.post(std::make_unique<EspInboundSa>(std::move(sa)))) return false;
    pipes_.rx->control.notify();
    return true;
}

void EspDatapath::send_probe() { pipes_.ask_tx(pipes_.tx->probe_requests); }

DatapathStats EspDatapath::stats() const {
    return pipes_.snapshot<DatapathStats>();
}

EspLiveness EspDatapath::liveness() const {
    return {pipes_.rx->last_rx.get(), pipes_.rx->last_probe_reply.get()};
}

std::optional<std::string> EspDatapath::failure() const { return pipes_.failure(); }

}  // namespace espvpn::datapath
