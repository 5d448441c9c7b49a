// EspProber: asks "does ESP work again?" while the HTTPS fallback carries the
// traffic: seals GP ESP probes with a fresh SA pair, sends them on the ESP UDP
// socket and opens what comes back, on the control thread (a few packets a
// second, so no datapath threads). When a reply arrives, the SAs are handed to
// a new ESP EspDatapath, sequence numbers and replay window intact.
//
// The UDP socket is the prober's alone while it exists (no ESP EspDatapath runs).
#pragma once

#include <cstdint>
#include <optional>

#include "protocols/esp/esp_sa.h"
#include "src/datapath/esp/esp_datapath.h"
#include "src/io/packet_batch.h"
#include "src/io/udp_socket.h"

namespace espvpn::session {

class EspProber {
public:
    EspProber(io::UdpSocket& udp, EspOutboundSa outbound, EspInboundSa inbound, const datapath::ProbeTarget& target);

    // Seals and sends one probe (never blocks; a full socket just loses it).
    void send_probe();
    // Opens every datagram waiting on the socket; true once a probe reply was
    // among them (later calls keep returning true).
    bool take_replies();
    std::uint64_t probes_sent() const { return sent_; }

    // The SAs for the ESP datapath (the prober is spent afterwards).
    datapath::EspInitialSas release_sas();

private:
    io::UdpSocket& udp_;
    std::optional<EspOutboundSa> out_;
    std::optional<EspInboundSa> in_;
    datapath::ProbeTarget target_;
    io::PacketBatch tx_;
    io::PacketBatch rx_;
    std::uint16_t seq_ = 0;
    std::uint64_t sent_ = 0;
    bool answered_ = false;
};

}  // namespace espvpn::session
