#include "src/datapath/datapath_stats.h"

#include <cstdio>

#include "protocols/base/hex.h"

namespace espvpn::datapath {

EspTxStats EspTxCounters::snapshot() const {
    EspTxStats s;
    load_into(s);
    s.spi = spi.load(std::memory_order_relaxed);
    s.next_sequence = next_sequence.load(std::memory_order_relaxed);
    s.needs_rekey = needs_rekey.load(std::memory_order_relaxed);
    return s;
}

EspRxStats EspRxCounters::snapshot() const {
    EspRxStats s;
    load_into(s);
    s.spi = spi.load(std::memory_order_relaxed);
    s.previous_spi = previous_spi.load(std::memory_order_relaxed);
    return s;
}

const char* transport_name(Transport t) {
    switch (t) {
        case Transport::none: return "none";
        case Transport::esp: return "esp";
        case Transport::https: return "https";
    }
    return "none";
}

std::uint64_t DatapathStats::drops() const { return drops_of(tx) + drops_of(rx) + drops_of(https); }

std::string DatapathStats::to_json() const {
    std::string o = "{\"transport\": \"" + std::string(transport_name(transport)) +
                    "\", \"transport_switches\": " + std::to_string(transport_switches) + ", \"tx\": {";
    append_json_members(o, static_cast<const EspTxCounts&>(tx));
    o += ", \"spi\": \"" + hex32(tx.spi) + "\", \"next_sequence\": " + std::to_string(tx.next_sequence) +
         ", \"needs_rekey\": " + (tx.needs_rekey ? "true" : "false") + "}, \"rx\": {";
    append_json_members(o, static_cast<const EspRxCounts&>(rx));
    o += ", \"spi\": \"" + hex32(rx.spi) + "\", \"previous_spi\": \"" + hex32(rx.previous_spi) +
         "\"}, \"https\": {";
    append_json_members(o, https);
    return o + "}}";
}

std::string DatapathStats::to_text() const {
    // Zero counters are left out: the line stays readable and every non-zero drop shows.
    std::string o;
    // The transport and HTTPS lines only once there is an HTTPS side to speak of.
    bool https_used = transport == Transport::https || transport_switches != 0;
    https.for_each([&](std::string_view, std::uint64_t x) { https_used = https_used || x != 0; });
    if (https_used)
        o += "transport=" + std::string(transport_name(transport)) + " switches=" + std::to_string(transport_switches) +
             "\n";
    o += "tx spi=" + hex32(tx.spi) + " seq=" + std::to_string(tx.next_sequence);
    append_nonzero_text(o, static_cast<const EspTxCounts&>(tx));
    o += "\nrx spi=" + hex32(rx.spi) + " previous=" + hex32(rx.previous_spi);
    append_nonzero_text(o, static_cast<const EspRxCounts&>(rx));
    if (!https_used) return o;
    o += "\nhttps";
    append_nonzero_text(o, https);
    return o;
}

}  // namespace espvpn::datapath
