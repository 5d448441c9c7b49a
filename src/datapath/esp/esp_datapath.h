// EspDatapath: the ESP tunnel's two packet pipelines, one thread each.
//
//   tx (send.cpp):    tun read (TSO split) -> ESP seal in place -> sendmmsg / UDP GSO
//   rx (receive.cpp): recvmmsg / UDP GRO -> ESP open in place (replay after ICV)
//                     -> probe replies taken out -> GRO coalesce -> tun write
//
// A rekey installs the new inbound SA, then the outbound one; the old inbound SA
// stays as "previous" for options.previous_sa_grace, packets keep flowing.
//
// Handover: SAs are built on the control thread (key schedules, allocation) and
// queued; each pipeline picks them up between batches. The pipelines never wait
// for the control plane and take no lock per packet. install_* / send_probe /
// stop are meant for one control thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "protocols/base/result.h"
#include "src/datapath/pipeline_threads.h"
#include "protocols/esp/esp_sa.h"
#include "src/datapath/datapath_stats.h"
#include "src/datapath/handover_queue.h"
#include "src/io/tun_device.h"
#include "src/io/udp_socket.h"

namespace espvpn::datapath {

// Where GP ESP probes go: from the tunnel address to the gateway's gw-address
// (both IPv4 or both IPv6). Replies from that address are taken out of the rx path.
struct ProbeTarget {
    std::uint8_t source[16] = {};
    std::uint8_t gateway[16] = {};
    std::size_t address_size = 0;  // 0: no probes; 4 or 16

    static Result<ProbeTarget> parse(std::string_view tunnel_address, std::string_view gw_address);
    bool enabled() const { return address_size != 0; }
    std::span<const std::uint8_t> gateway_address() const { return {gateway, address_size}; }
};

struct EspDatapathOptions {
    // Largest inner packet sent (the tunnel MTU). Larger ones are dropped and
    // answered with ICMP frag-needed / packet-too-big (see too_big.h).
    std::size_t max_inner_size = 1400;
    // The tun's MTU if larger than max_inner_size (slots must hold what it reads).
    std::size_t tun_mtu = 0;
    std::size_t tx_batch = 128;  // inner packets per tx batch (a 64 KiB super-packet splits into ~48)
    std::size_t rx_batch = 64;   // datagrams per rx batch
    // How long the rx thread waits after a wake-up while a download arrives one datagram at
    // a time (rx_linger.h; the client's is client_rx_linger()); zero: never.
    std::chrono::microseconds rx_linger{0};
    ProbeTarget probe;
    // Gateway side: the socket is unconnected; send to the address the latest
    // authentic packet came from.
    bool learn_peer = false;
    // How long the previous inbound SA still opens packets after a new one is installed.
    std::chrono::milliseconds previous_sa_grace{30000};
    // install_outbound_when_peer_uses: switch anyway after this long.
    std::chrono::milliseconds deferred_outbound_timeout{10000};
    unsigned icmp_too_big_per_second = 100;
};

// When the rx pipeline last saw signs of life (steady clock; epoch = never).
struct EspLiveness {
    std::chrono::steady_clock::time_point last_rx;           // any authentic ESP packet
    std::chrono::steady_clock::time_point last_probe_reply;  // a GP probe reply
};

// The SAs a datapath starts with: taken by each thread before it reads its
// first packet, so nothing read from the tun is dropped for want of an SA.
struct EspInitialSas {
    std::optional<EspOutboundSa> outbound;
    std::optional<EspInboundSa> inbound;
};

class EspTxPipeline;
class EspRxPipeline;
struct EspRxToTx;

class EspDatapath {
public:
    // Starts both threads. tun and udp must outlive the EspDatapath and must not be
    // used by anyone else while it runs (TunDevice/UdpSocket are not thread-safe;
    // tx only reads the tun and sends, rx only receives and writes the tun).
    static Result<std::unique_ptr<EspDatapath>> start(io::TunDevice& tun, io::UdpSocket& udp,
                                                   const EspDatapathOptions& options, EspInitialSas sas = {});
    ~EspDatapath();
    EspDatapath(const EspDatapath&) = delete;
    EspDatapath& operator=(const EspDatapath&) = delete;

    // Stops and joins both threads (idempotent). Queued SAs are freed.
    void stop();

    // The new outbound SA is used from the next batch on. False if the queue is
    // full (the tx thread has not run for several handovers) or stopped.
    bool install_outbound(EspOutboundSa sa);
    // Gateway style: keep sending on the current SA until an authentic packet on
    // inbound SPI `peer_spi` shows the peer has the new keys (or the timeout runs
    // out), then switch. Avoids sending on keys the peer does not know yet.
    bool install_outbound_when_peer_uses(EspOutboundSa sa, std::uint32_t peer_spi);
    // The new inbound SA becomes current; the current one stays as previous for
    // options.previous_sa_grace (an older previous is dropped).
    bool install_inbound(EspInboundSa sa);
    // Asks the tx thread to seal and send one GP ESP probe (no-op without a probe target).
    void send_probe();

    DatapathStats stats() const;
    EspLiveness liveness() const;
    // Empty while both threads run; the reason when one stopped on an error.
    std::optional<std::string> failure() const;

private:
    EspDatapath();
    bool install_outbound_after(EspOutboundSa sa, std::optional<std::uint32_t> peer_spi);
    std::unique_ptr<EspRxToTx> rx_to_tx_;
    PipelinePair<EspTxPipeline, EspRxPipeline> pipes_;
};

}  // namespace espvpn::datapath
